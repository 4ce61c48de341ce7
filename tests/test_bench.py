"""The floor benchmark's table and target checks, from rows like a GPU run writes."""

from convlab.bench import check_targets, format_table


def row(size, stride, layout, ours_ms, copy_ms, cudnn_ms=1.0, empty_ms=0.0025, status="ok"):
    return {"device": "Test GPU", "size": size, "stride": stride, "layout": layout,
            "ours_kernel": "conv_floor_x block~256", "ours_status": status, "ours_ms": ours_ms,
            "ours_max_rel_err": 3e-7, "cudnn_ms": cudnn_ms, "cudnn_engine": "eng0", "naive_ms": 0.3,
            "copy_ms": copy_ms, "empty_launch_ms": empty_ms}


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
    assert "1.300" in floor and "4.0% over" in floor


def test_cudnn_target_reports_the_ceiling_of_a_read_once_kernel():
    cudnn = [line for line in check_targets(large(0.130)) if "cuDNN / ours" in line]
    assert len(cudnn) == 1  # only the 4096^2 stride-1 row is judged
    assert cudnn[0].startswith("MISS") and "14.62" in cudnn[0] and "would be 19.00" in cudnn[0]
    assert check_targets(large(0.110))[1].startswith("met ")


def test_launch_target_compares_with_a_copy_of_the_same_bytes():
    rows = [row(128, 1, "hwc", 0.0040, 0.0035), row(512, 1, "nchw", 0.0060, 0.0060)]
    launch = check_targets(rows)[0]
    assert launch.startswith("MISS")
    assert "worst 2.40 (512^2 stride 1 nchw)" in launch
    assert "1.40-2.40 x the empty launch" in launch and "ours / copy there 1.00-1.14" in launch


def test_a_row_that_is_not_ok_is_a_miss_never_a_time():
    rows = large() + [row(2048, 1, "hwc", None, 0.03, status="wrong")]
    lines = check_targets(rows)
    assert "MISS correctness: 2048^2 stride 1 hwc is wrong" in lines
    floor = next(line for line in lines if "ours / copy" in line)
    assert floor.startswith("MISS") and "2048^2 stride 1 hwc" in floor


def test_table_prints_ratios_ceilings_and_targets():
    text = format_table(large())
    assert text.splitlines()[0] == "floor benchmark on Test GPU"
    assert "cuDNN/copy" in text and "copy/empty" in text
    assert "targets (floor kernels):" in text
    first = text.splitlines()[2].split()
    assert first[:3] == ["4096", "1", "hwc"] and first[5] == "1.100"
