"""The floor benchmark's table and target checks, from rows like a GPU run writes."""

import pytest

from convlab.bench.floor import check_targets, format_table
from convlab.bench.sgemm import format_gemm_table, gemm_target


def row(size, stride, layout, ours_ms, copy_ms, cudnn_ms=1.0, empty_ms=0.0025, status="ok"):
    return {"device": "Test GPU", "size": size, "stride": stride, "layout": layout,
            "ours_kernel": "conv_floor_x block~256", "ours_status": status, "ours_ms": ours_ms,
            "ours_max_rel_err": 3e-7, "cudnn_ms": cudnn_ms, "cudnn_engine": "eng0", "naive_ms": 0.3,
            "copy_ms": copy_ms, "empty_launch_ms": empty_ms}


def graphed(r, ours_ms, copy_ms, status="ok", ours_timing="graph", copy_timing="graph"):
    """A launch-bound row with its graph-timed columns (as run_benchmark writes them)."""
    return {**r, "ours_graph_kernel": "conv_floor_x block~128", "ours_graph_status": status,
            "ours_graph_ms": ours_ms, "ours_graph_timing": ours_timing, "copy_graph_ms": copy_ms,
            "copy_graph_timing": copy_timing}


def launch_bound(ours_512=0.0020):
    return [graphed(row(128, 1, "hwc", 0.0040, 0.0035), 0.0010, 0.0010),
            graphed(row(512, 2, "nchw", 0.0060, 0.0060), ours_512, 0.0020)]


def graph_line(rows):
    return next(line for line in check_targets(rows) if "graph-timed, at" in line)


def large(ours_4096_s1=0.110):
    return [row(4096, 1, "hwc", ours_4096_s1, 0.100, cudnn_ms=1.9), row(4096, 2, "hwc", 0.066, 0.065),
            row(2048, 3, "nchw", 0.020, 0.019)]


def test_floor_target_met_names_the_worst_case():
    lines = check_targets(large())
    floor = next(line for line in lines if "ours / copy" in line)
    assert floor.startswith("met ")
    assert "worst 1.100 (4096^2 stride 1 hwc)" in floor


def test_floor_target_missed_says_by_how_much():
    floor = next(line for line in check_targets(large(0.130)) if "ours / copy" in line)
    assert floor.startswith("MISS")
    assert "1.300" in floor and "13.0% over" in floor


def test_only_the_floor_and_graph_targets_are_judged():
    lines = check_targets(large(0.130) + launch_bound())
    assert not [line for line in lines if "cuDNN / ours" in line or "empty launch" in line]
    assert [line[:4] for line in lines] == ["MISS", "met "]  # the floor at 1.300 misses; graph-timed 1.0 is met


def test_a_row_that_is_not_ok_is_a_miss_never_a_time():
    rows = large() + [row(2048, 1, "hwc", None, 0.03, status="wrong")]
    lines = check_targets(rows)
    assert "MISS correctness: 2048^2 stride 1 hwc is wrong" in lines
    floor = next(line for line in lines if "ours / copy" in line)
    assert floor.startswith("MISS") and "2048^2 stride 1 hwc" in floor


def test_a_wrong_row_with_a_time_is_a_miss_not_its_time():
    rows = large() + [row(2048, 1, "hwc", 0.02, 0.03, status="wrong")]
    floor = next(line for line in check_targets(rows) if "ours / copy" in line)
    assert floor.startswith("MISS") and "2048^2 stride 1 hwc, no time" in floor


def test_table_prints_ratios_ceilings_and_targets():
    text = format_table(large())
    assert text.splitlines()[0] == "floor benchmark on Test GPU"
    assert "cuDNN/copy" in text and "copy/empty" in text
    assert "targets (floor kernels):" in text
    first = text.splitlines()[2].split()
    assert first[:3] == ["4096", "1", "hwc"] and first[5] == "1.100"


def test_graph_target_met_names_the_worst_case():
    line = graph_line(launch_bound(0.0021))
    assert line.startswith("met  ours <= 1.1 x the faster copy of the same bytes, graph-timed, at 128, 256, 512")
    assert "worst 1.050 (512^2 stride 2 nchw)" in line


def test_graph_target_missed_says_by_how_much():
    line = graph_line(launch_bound(0.0024))
    assert line.startswith("MISS") and "worst 1.200 (512^2 stride 2 nchw, 9.1% over)" in line


@pytest.mark.parametrize("change,why", [
    ({"status": "wrong", "ours_ms": 0.0001}, "ours is wrong"),
    ({"ours_timing": "warm"}, "ours not graph-timed (warm)"),
    ({"copy_timing": "warm"}, "the copy not graph-timed (warm)"),
])
def test_a_graph_row_that_is_not_ok_or_not_graph_timed_is_a_miss_never_a_time(change, why):
    ours_ms = change.pop("ours_ms", 0.0010)
    rows = [*launch_bound(), graphed(row(256, 1, "hwc", 0.004, 0.004), ours_ms, 0.0010, **change)]
    line = graph_line(rows)
    assert line.startswith("MISS") and f"worst nan (256^2 stride 1 hwc, {why})" in line
    assert ("MISS correctness: 256^2 stride 1 hwc graph-timed is wrong" in check_targets(rows)) == (why == "ours is wrong")


def test_rows_without_graph_timing_have_no_graph_target_or_table():
    assert not any("graph-timed" in line for line in check_targets(large()))
    assert "graph-timed" not in format_table(large())


def test_table_lists_the_graph_timed_rows():
    text = format_table(launch_bound())
    assert "launch-bound sizes, graph-timed" in text
    line = next(line for line in text.splitlines() if line.split()[:3] == ["512", "2", "nchw"] and "copy graph" in line)
    assert line.split()[3:7] == ["0.00200", "0.00200", "nan", "1.000"]  # ours, library copy, copy kernel, ratio


def gemm_row(size, ours_ms, cublas_ms, ours_status="ok", cublas_status="ok"):
    return {"size": size, "ours_kernel": "sgemm_vectorized bk~16", "ours_status": ours_status, "ours_ms": ours_ms,
            "ours_max_rel_err": 2e-6, "cublas_status": cublas_status, "cublas_ms": cublas_ms,
            "gflops_ours": 2 * size**3 / ours_ms / 1e6, "gflops_cublas": 2 * size**3 / cublas_ms / 1e6}


def test_sgemm_target_met_at_the_worst_size():
    line = gemm_target([gemm_row(4096, 2.0, 1.9), gemm_row(8192, 16.0, 15.0)])[-1]
    assert line.startswith("met ") and "worst 8192^3 93.8%" in line


def test_sgemm_target_missed_says_by_how_many_points():
    line = gemm_target([gemm_row(4096, 2.0, 1.66), gemm_row(8192, 16.0, 15.0)])[-1]
    assert line.startswith("MISS") and "worst 4096^3 83.0%, 7.0 points short" in line


@pytest.mark.parametrize("side", ["ours_status", "cublas_status"])
def test_an_sgemm_row_that_is_not_ok_is_a_miss_never_a_time(side):
    lines = gemm_target([gemm_row(4096, 1.0, 1.0, **{side: "wrong"}), gemm_row(8192, 16.0, 15.0)])
    assert lines[0].startswith("MISS correctness: 4096^3")
    assert lines[-1].startswith("MISS") and "worst 4096^3 no time" in lines[-1]


def test_sgemm_table_prints_the_share_and_the_target():
    text = format_gemm_table([gemm_row(4096, 2.0, 1.9)])
    assert "95.0%" in text and "targets (SGEMM):" in text


def test_graph_target_divides_by_the_faster_of_the_library_copy_and_the_copy_kernel():
    rows = [{**r, "copy_kernel_graph_ms": 0.0015} for r in launch_bound(0.0020)]
    line = graph_line(rows)  # 512^2: ours 0.0020 over the copy kernel's 0.0015, not the library's 0.0020
    assert line.startswith("MISS") and "worst 1.333 (512^2 stride 2 nchw" in line
    assert "the library's copy is 0.67-1.33 x a copy kernel of the same bytes there" in line
    assert "lib copy" in format_table(rows) and "copy krnl" in format_table(rows)
    rows[1]["copy_graph_timing"] = "warm"  # a library copy not graph-timed is never the denominator
    assert "512^2 stride 2 nchw, the copy not graph-timed (warm)" in graph_line(rows)


def test_graph_target_names_the_copy_kernel_with_the_convs_multiply_adds():
    rows = [{**r, "copy_kernel_graph_ms": 0.0010, "copy_fma_graph_ms": fma}
            for r, fma in zip(launch_bound(), (0.0012, 0.00105))]
    line = graph_line(rows)
    assert "the copy kernel with the conv's multiply-adds added (nothing else) is 1.05-1.20 x the copy" in line
    assert "above 1.1 at 1 of 2 rows" in line
    assert "+FMAs/copy" in format_table(rows)
    rows[0]["copy_fma_graph_ms"] = 0.0011
    assert graph_line(rows).endswith("(nothing else) is 1.05-1.10 x the copy")  # at the limit is not above it


@pytest.mark.parametrize("stride,fmas", [(1, 26), (2, 10), (3, 5)])
def test_the_copy_kernel_never_does_more_multiply_adds_than_the_conv(stride, fmas):
    from convlab.bench.floor import conv_fmas_per_float
    from convlab.problem.geometry import ConvProblem

    problem = ConvProblem(height=128, width=128, in_channels=3, out_channels=3, filter_size=3, stride=stride, padding=1)
    floats_copied = problem.bytes_moved // 8  # what the copy of its bytes reads
    assert conv_fmas_per_float(problem) == fmas
    assert fmas * floats_copied <= problem.flops // 2 < (fmas + 1) * floats_copied
