"""The ``quantization:`` group: bitsandbytes weight quantisation."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from llem.config.knobs import BITSANDBYTES, knob
from llem.config.model import Dtype


class QuantType(Enum):
    nf4 = "nf4"
    fp4 = "fp4"


@dataclass
class QuantizationConfig:
    load_in_4bit: bool = knob(
        False, doc="bitsandbytes 4-bit weights; exclusive with load_in_8bit.", goes_to=BITSANDBYTES
    )
    load_in_8bit: bool = knob(
        False,
        doc="bitsandbytes LLM.int8() weights; exclusive with load_in_4bit.",
        goes_to=BITSANDBYTES,
    )
    bnb_4bit_compute_dtype: Dtype | None = knob(
        None, doc="Compute dtype of 4-bit layers; needs load_in_4bit.", goes_to=BITSANDBYTES
    )
    bnb_4bit_quant_type: QuantType | None = knob(
        None, doc="4-bit data type; needs load_in_4bit.", goes_to=BITSANDBYTES
    )
    bnb_4bit_use_double_quant: bool | None = knob(
        None,
        doc="Quantise the quantisation constants too; needs load_in_4bit.",
        goes_to=BITSANDBYTES,
    )
