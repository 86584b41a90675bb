"""The soft-rod bench (paper 004, section X): a silicone rod moved by a UR3 arm, simulated by the Cosserat model;
its experiment files."""
