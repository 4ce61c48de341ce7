# Paths and report helpers of the report stage's seed comparison (rules in report.smk).
SEED_TABLES = "config/seeds/seed_tables.csv"
METHOD_MAP = "config/seeds/method_map.yaml"
SEED_DIR = f"{RESULTS}/seeds"
# The report category of each seed: the pipeline experiment that reproduces it.
SEED_EXPERIMENT = {
    "000": "conv2d",
    "001": "conv2d",
    "002": "tiling",
    "003": "gemm",
    "004": "winograd_layers",
}


def seed_item(name, seed, what, kernel, stride, size, caption=None):
    """A seed figure or table in the report, filed under the experiment that reproduces it
    (update(): a failed re-render restores the previous one)."""
    suffix = "html" if name.endswith("_table") else "png"
    return report(
        update(f"{SEED_DIR}/{name}.{suffix}"),
        caption=f"../report/{caption or name}.rst",
        category=SEED_EXPERIMENT[seed],
        subcategory=f"Seed {seed} vs this run",
        labels={
            "figure": what,
            "seed": seed,
            "kernel": kernel,
            "stride": stride,
            "size": size,
        },
    )


def seed_table(seed, kernel, stride, size):
    return seed_item(
        f"seed{seed}_table",
        seed,
        "table: every seed number",
        kernel,
        stride,
        size,
        caption="seed_table",
    )
