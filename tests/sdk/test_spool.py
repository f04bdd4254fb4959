"""The disk spool's files and bounds, and the template copies a cold start serves (issue 34):
real files, a real collector, real processes for the cold start."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import promptrail
from promptrail import _runtime
from promptrail._disk import scope_of
from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.testing import free_port, serve
from tests.keys import DEFAULT_KEY
from tests.sdk.conftest import greet
from tests.sdk.outage_steps import ROOT, calls, start_app, stored, wait_spooled, work


@pytest.fixture(autouse=True)
def fresh() -> None:
    _runtime.reset_stats()


# A flush with the collector down waits out its whole timeout (the spool's replay retries until
# it): the round's records are spilled to their file when the first post fails, milliseconds
# in, so half a second keeps each round one file on a loaded machine (1 s rounds cost the
# full-spool test 9 s of waiting).
DOWN_FLUSH_SECONDS = 0.5


def spooled_while_down(url: str, rounds: int, per_round: int, **init: object) -> None:
    """Capture ``rounds`` x ``per_round`` calls with the collector down: one spill per round."""
    promptrail.init(api_key=DEFAULT_KEY, base_url=url, flush_interval=60, **init)  # type: ignore[arg-type]
    # The spool is empty: after this look, the shipper's thread waits its 60 s (a start with a
    # backlog would look again soon), so each round below is one flush and one file.
    assert promptrail.flush(timeout=1.0)
    # Not needed for the count of files: a round of that thread while the collector is down
    # only retries an existing file (it never writes one), and it drains spans only when
    # woken by 512 of them or after its 60 s, which no round below reaches.
    for r in range(rounds):
        for n in range(per_round):
            work("t", r * per_round + n)
        assert promptrail.flush(timeout=DOWN_FLUSH_SECONDS) is False
    promptrail.shutdown()


def replayed(settings: Settings, port: int, **init: Any) -> tuple[dict[str, Any], Counter[Any]]:
    """Start again with the collector back at ``port``: flush; the stats, and the calls stored."""
    url = f"http://127.0.0.1:{port}"
    _runtime.reset_stats()
    with serve(create_app(settings), port=port):
        promptrail.init(api_key=DEFAULT_KEY, base_url=url, flush_interval=0.05, **init)
        assert promptrail.flush(timeout=20)
        stats = promptrail.stats()
        promptrail.shutdown()
        return stats, calls(stored(url))


def files_of(url: str) -> list[Path]:
    cache = Path(os.environ["PROMPTRAIL_CACHE_DIR"])
    return sorted((cache / "spool" / scope_of(url, DEFAULT_KEY) / "records").glob("*.spool"))


def test_a_torn_and_a_corrupt_file_lose_only_their_bad_blocks_counted_and_said_once(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    # Under 512 a round: the shipper's thread wakes early for 512 queued spans (a second file).
    spooled_while_down(url, rounds=2, per_round=400)
    torn, flipped = files_of(url)
    torn_count, flipped_count = (int(f.stem.rsplit("-", 1)[1]) for f in (torn, flipped))
    data = torn.read_bytes()
    torn.write_bytes(data[: len(data) - 20])  # mid-way through its last block
    data = bytearray(flipped.read_bytes())
    data[40] ^= 0xFF  # inside its first block's records
    flipped.write_bytes(bytes(data))
    lost = (torn_count - 256 * ((torn_count - 1) // 256)) + min(256, flipped_count)

    stats, got = replayed(settings, port)

    assert stats["spool_dropped"] == {"spool_corrupt": lost}
    assert stats["replayed"] == 800 - lost == sum(got.values())
    assert set(got.values()) == {1}
    said = [r.getMessage() for r in caplog.records if "torn or corrupt" in r.getMessage()]
    assert len(said) == 2, said
    assert files_of(url) == []


def test_a_full_spool_drops_its_oldest_records_and_counts_them(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    probe = f"http://127.0.0.1:{free_port()}"
    spooled_while_down(probe, rounds=1, per_round=100)
    bound = int(3.5 * files_of(probe)[0].stat().st_size)  # room for 3 files of 100 records
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    _runtime.reset_stats()
    spooled_while_down(url, rounds=8, per_round=100, spool_max_bytes=bound)
    dropped = promptrail.stats()["spool_dropped"]["spool_full"]
    assert dropped == 500
    assert sum(f.stat().st_size for f in files_of(url)) <= bound
    assert len([r for r in caplog.records if "over its bounds" in r.getMessage()]) == 1

    _, got = replayed(settings, port)

    assert sorted(n for _, n in got) == list(range(dropped, 800))  # the newest were kept


def test_a_spool_of_another_key_or_url_is_never_sent(settings: Settings) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    spooled_while_down(url, rounds=1, per_round=10)
    with serve(create_app(settings), port=port):
        for key, base in (("pr-another-project", url), (DEFAULT_KEY, f"http://localhost:{port}")):
            promptrail.init(api_key=key, base_url=base, flush_interval=0.05)
            promptrail.flush(timeout=5)
            assert promptrail.stats()["replayed"] == 0
            promptrail.shutdown()
        assert stored(url) == [] and len(files_of(url)) == 1
        promptrail.init(api_key=DEFAULT_KEY, base_url=url, flush_interval=0.05)
        assert promptrail.flush(timeout=10)
        assert len(stored(url)) == 10
        promptrail.shutdown()


@pytest.mark.parametrize("where", ["under-a-file", "/proc/promptrail-cache"])
def test_an_unusable_cache_directory_falls_back_to_memory_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, where: str
) -> None:
    (tmp_path / "a-file").write_text("")
    cache = tmp_path / "a-file" / "cache" if where == "under-a-file" else Path(where)
    for _ in range(2):
        promptrail.init(
            api_key=DEFAULT_KEY, base_url=f"http://127.0.0.1:{free_port()}", cache_dir=cache
        )
        assert promptrail.stats()["spool"] is None
        assert work("t", 1) == 1
        promptrail.shutdown()
    warned = [
        r.getMessage() for r in caplog.records if "cannot keep records on disk" in r.getMessage()
    ]
    assert len(warned) == 1 and str(cache) in warned[0]


def test_a_process_started_with_the_collector_down_serves_the_last_good_template(
    settings: Settings,
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with serve(create_app(settings), port=port), promptrail.Client(DEFAULT_KEY, url) as client:
        greet(client, "cold")
        assert client.prompts.template("cold").version == 1
    script = (
        "import promptrail\n"
        f"with promptrail.Client({DEFAULT_KEY!r}, {url!r}, max_retries=0) as client:\n"
        "    tpl = client.prompts.template('cold')\n"
        "    print(tpl.version, tpl.stale, tpl.render(name='Ada'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1 True Say hello to Ada."
    assert "serving the cached template of 'cold'" in done.stderr


def test_spooled_records_past_the_age_bound_are_dropped_unsent_and_counted(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    spooled_while_down(url, rounds=1, per_round=10)
    # The age is the file's name's time: name the file an hour old (no waiting on a clock).
    (spooled,) = files_of(url)
    _, rest = spooled.name.split("-", 1)
    spooled.rename(spooled.with_name(f"{time.time_ns() - 3600 * 10**9:020d}-{rest}"))

    stats, got = replayed(settings, port, spool_max_age=600)

    assert got == Counter()
    assert stats["spool_dropped"] == {"spool_expired": 10}
    assert stats["replayed"] == 0
    assert files_of(url) == []
    assert len([r for r in caplog.records if "over its bounds" in r.getMessage()]) == 1


def test_a_spool_directory_removed_mid_outage_falls_back_to_memory_with_one_warning(
    settings: Settings, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cache = tmp_path / "cache"
    promptrail.init(api_key=DEFAULT_KEY, base_url=url, flush_interval=60, cache_dir=cache)
    assert promptrail.flush(timeout=1.0)
    shutil.rmtree(cache)  # a cleaner ran, or the volume went away
    for n in range(3):
        work("t", n)
    assert promptrail.flush(timeout=1.0) is False
    assert work("t", 3) == 3  # the application goes on
    assert promptrail.flush(timeout=1.0) is False
    stats = promptrail.stats()
    assert (stats["spooled"], stats["pending"], stats["dropped_total"]) == (0, 4, 0)
    said = [r.getMessage() for r in caplog.records if "cannot write records" in r.getMessage()]
    assert len(said) == 1, said

    with serve(create_app(settings), port=port):
        assert promptrail.flush(timeout=20)
        got = calls(stored(url))
        promptrail.shutdown()

    assert got == Counter({("t", n): 1 for n in range(4)})


def test_an_existing_cache_directory_keeps_its_mode_and_what_is_made_in_it_is_private(
    tmp_path: Path,
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    os.chmod(shared, 0o755)
    promptrail.init(
        api_key=DEFAULT_KEY, base_url=f"http://127.0.0.1:{free_port()}", cache_dir=shared
    )
    spool = Path(promptrail.stats()["spool"])
    promptrail.shutdown()

    assert oct(shared.stat().st_mode & 0o777) == "0o755"  # not ours to change
    made = [spool, spool.parent, spool.parent.parent]
    assert {oct(d.stat().st_mode & 0o777) for d in made} == {"0o700"}


def test_replaying_what_another_process_left_is_said_when_it_starts_and_ends_with_the_count(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="promptrail")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    app = start_app("capture", url, "30", "left")
    wait_spooled(app)
    app.send_signal(signal.SIGKILL)  # its records stay in the spool, for this process
    app.communicate(timeout=10)
    place = files_of(url)[0].parent

    stats, got = replayed(settings, port)

    assert got == Counter({("left", n): 1 for n in range(30)}) and stats["replayed"] == 30
    said = [r for r in caplog.records if "another process" in r.getMessage()]
    assert [(r.levelno, r.getMessage()) for r in said] == [
        (
            logging.INFO,
            f"promptrail: replaying 30 records that another process left in the spool at {place}",
        ),
        (
            logging.INFO,
            "promptrail: replayed 30 of 30 records that another process left in the spool at "
            f"{place}",
        ),
    ]
    assert files_of(url) == []


def test_replaying_its_own_records_says_nothing_of_another_process(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="promptrail")
    port = free_port()
    spooled_while_down(f"http://127.0.0.1:{port}", rounds=1, per_round=10)

    stats, got = replayed(settings, port)

    assert stats["replayed"] == 10 and sum(got.values()) == 10
    assert [r for r in caplog.records if "another process" in r.getMessage()] == []
