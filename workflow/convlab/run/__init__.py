"""Running one cell: load -> place -> set up -> launch -> time -> verify -> one row (runner, steps),
and the cell job around it (the device lock, the job's phases, the row written)."""
