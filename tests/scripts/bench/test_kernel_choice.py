"""The measurement behind the choice of compiled kernels runs and checks each means' results."""

import json

import pytest

from mqstore.scripts.bench import kernel_choice


def test_every_means_is_measured_or_says_why_not(capsys: pytest.CaptureFixture[str]) -> None:
    assert kernel_choice.main(["--records", "10", "--rounds", "20"]) == 0
    report = json.loads(capsys.readouterr().out)
    means = report["means"]
    assert set(means) == {"python_zlib_loop", "c_extension", "numba_njit"}
    for name in ("python_zlib_loop", "c_extension"):  # each run asserts its CRCs equal zlib's before timing
        assert means[name]["ns_per_record"] > 0 and means[name]["rss_mb"] > 0, means[name]
    numba = means["numba_njit"]
    assert "ns_per_record" in numba or "numba" in numba["error"], numba
