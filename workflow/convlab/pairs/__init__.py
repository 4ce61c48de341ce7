"""Kernel versions measured side by side on the device: the `pair` step's pairs (pairmeasure), a
preview's saved version against the recorded one (previewplan, previewverdicts) and the A/A
self-check (selfcheck). Above run/, whose pairs they time, and history/, whose database and rule
they read."""
