"""Robots: one package per robot (its description, command types, experiment loader, backends), never another
robot. ``aiko`` is the snake robot Aiko; ``rod_bench`` the soft-rod bench of paper 004."""
