"""Fill a tiktoken cache directory without reaching tiktoken's download server.

The playground's cost estimate counts input tokens with tiktoken (docs/api-notes.md,
"Playground"). tiktoken downloads its BPE files from a blob store on first use; a machine that
reaches only package registries cannot. The same files ship inside the npm package
``js-tiktoken`` (by tiktoken's own author), in a compact form: this script takes that package at
a pinned version with ``npm pack``, writes each encoding back in tiktoken's own format under the
name tiktoken gives its cache entry, and then loads it through tiktoken with that cache, which
checks each file against the SHA-256 it expects — a file that is not byte-for-byte the original
is refused there, so nothing here is trusted on its own.

Usage: ``python tools/tiktoken_cache.py <cache dir>`` (``make install`` runs it into
``.cache/tiktoken``; ``TIKTOKEN_CACHE_DIR`` points tiktoken there).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

JS_TIKTOKEN = "js-tiktoken@1.0.21"
ENCODINGS = ("o200k_base", "cl100k_base")
BLOB_URL = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"


def _tiktoken_file(module_text: str) -> bytes:
    """One encoding's ``.tiktoken`` bytes from js-tiktoken's ranks module."""
    prefix = "export default "
    ranks = json.loads(module_text[len(prefix) :].strip().rstrip(";"))
    by_token: dict[str, int] = {}
    # Each line: a display form, the first rank, then base64 tokens of consecutive ranks.
    for line in ranks["bpe_ranks"].split("\n"):
        if not line:
            continue
        _, offset, *tokens = line.split(" ")
        for index, token in enumerate(tokens):
            by_token[token] = int(offset) + index
    ordered = sorted(by_token.items(), key=lambda item: item[1])
    return "".join(f"{token} {rank}\n" for token, rank in ordered).encode()


def fill(cache_dir: Path) -> None:
    """Write every encoding of :data:`ENCODINGS` missing from ``cache_dir``, then load them."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    # tiktoken names a cache entry by the SHA-1 of the address it would download from.
    names = {
        name: hashlib.sha1(BLOB_URL.format(name=name).encode()).hexdigest() for name in ENCODINGS
    }
    missing = [name for name, entry in names.items() if not (cache_dir / entry).exists()]
    if missing:
        with tempfile.TemporaryDirectory() as work:
            subprocess.run(
                ["npm", "pack", JS_TIKTOKEN, "--silent", "--pack-destination", work],
                check=True,
                stdout=subprocess.DEVNULL,
            )
            (tarball,) = Path(work).glob("js-tiktoken-*.tgz")
            with tarfile.open(tarball) as archive:
                for name in missing:
                    member = archive.extractfile(f"package/dist/ranks/{name}.js")
                    assert member is not None
                    data = _tiktoken_file(member.read().decode())
                    (cache_dir / names[name]).write_bytes(data)
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache_dir)
    import tiktoken

    for name in ENCODINGS:
        # tiktoken compares the cached file with its expected hash; a mismatch would send it
        # to the network, which fails here: the file is then removed and the step fails.
        try:
            tiktoken.get_encoding(name)
        except Exception as error:
            (cache_dir / names[name]).unlink(missing_ok=True)
            message = f"tiktoken refused the {name} file made from {JS_TIKTOKEN}: {error}"
            raise SystemExit(message) from error
    print(f"tiktoken encodings ready in {cache_dir}: {', '.join(ENCODINGS)}")


if __name__ == "__main__":
    fill(Path(sys.argv[1] if len(sys.argv) > 1 else ".cache/tiktoken").resolve())
