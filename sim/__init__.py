"""Simulators and their numerical tools. Pure physics: no hardware, no files, no CLI; never imports `aiko`."""
