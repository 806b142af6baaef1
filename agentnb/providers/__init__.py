"""Models and wire adapters. :mod:`.base` defines what a model is; :mod:`.scripted` is the offline model."""

from .base import ArgumentsDelta, Model, ModelRequest, StreamItem, TextDelta
from .scripted import ScriptedModel

__all__ = ["ArgumentsDelta", "Model", "ModelRequest", "ScriptedModel", "StreamItem", "TextDelta"]
