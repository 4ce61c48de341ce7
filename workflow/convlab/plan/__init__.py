"""Planning the grid: the config, the kernel registry, the experiment families, the cells and their
operands. Knows no backend: operands place themselves through any object with an array module."""
