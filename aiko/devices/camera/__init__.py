"""Camera device: OpenCV video sources, the red-marker rod tracker of paper 004 (X), a synthetic camera that films
the simulated rod, and the pipeline from frames to strains (strain observer). No robot code."""
