"""Ember: embedding operations compiled to Decoupled Access-Execute machines, and their simulator."""

__version__ = "0.1.0"
