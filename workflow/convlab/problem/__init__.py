"""A cell's problem, before any device: its geometry (shapes, FLOPs, the fewest bytes), layouts,
weights, the float64 reference and the verdict against it."""
