"""Sequence buckets, VAE windows and the warm-up list (pure Python)."""

from __future__ import annotations

import pytest

from device_worker.backends.ttnn.plan import (
    Geometry,
    base_buckets,
    song_buckets,
    warm_plan,
)
from device_worker.shapes import end_frame_for, plan_windows


def test_full_model_songs_need_sixteen_buckets_from_2304_to_6144() -> None:
    buckets = song_buckets()
    assert buckets == list(range(2304, 6144 + 1, 256)) and len(buckets) == 16  # spec 3.6: 2067-6136 frames


@pytest.mark.parametrize("seconds", [96, 97, 118, 119, 200, 284, 285])
def test_every_song_fits_its_bucket_with_less_than_one_bucket_of_padding(seconds: int) -> None:
    frames = end_frame_for(seconds)
    geo = Geometry.for_frames(frames)
    assert geo.seq % 256 == 0 and 0 <= geo.padded < 256 and geo.seq in song_buckets()


def test_base_model_has_one_bucket_and_no_padding() -> None:
    assert base_buckets() == [2048]
    assert Geometry.for_frames(2048).windows == [0, 2048]


def test_attention_windows_separate_real_rows_from_padding() -> None:
    assert Geometry.for_frames(2067).windows == [0, 2067, 2304]
    assert Geometry(300, 300).windows == [0, 300]


@pytest.mark.parametrize("frames", [2067, 4000, 6136])
@pytest.mark.parametrize("window,overlap", [(128, 32), (1024, 64)])
def test_vae_windows_have_one_shape_and_cover_the_song_in_order(frames: int, window: int, overlap: int) -> None:
    plan = plan_windows(frames, window, overlap)
    assert {w.length for w in plan} == {window}  # one compiled decoder program per song
    assert plan[0].keep_start == 0 and plan[-1].keep_end == frames
    for a, b in zip(plan, plan[1:], strict=False):
        assert a.keep_end == b.keep_start  # kept ranges tile the song
    assert all(0 <= w.start and w.start + w.length <= frames for w in plan)


def test_warm_plan_compiles_vae_windows_first_then_every_bucket_with_both_branches() -> None:
    plan = warm_plan(windows=(128, 1024))
    assert [s.key for s in plan[:2]] == ["vae:128x1", "vae:1024x1"]
    dit = plan[2:]
    assert [s.length for s in dit] == song_buckets() and {s.batch for s in dit} == {2}
    assert len(warm_plan(96, 96)) == 2  # one window + one bucket


def test_bad_ranges_are_refused() -> None:
    with pytest.raises(ValueError):
        song_buckets(200, 100)
    with pytest.raises(ValueError):
        Geometry.for_frames(0)
