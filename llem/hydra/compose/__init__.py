"""Composition: the configs Hydra composes for a sweep's points (``points``) and the study files
it composes them from (``studies``). Part of the adapter layer that the sweep may import."""
