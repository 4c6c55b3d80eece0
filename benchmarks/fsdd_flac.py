"""FSDD as FLAC, to carry it where the WAVs do not fit (a device call carries 64 MiB in all).

``pack SRC DST``: each ``SRC/recordings/*.wav`` as ``DST/recordings/*.flac`` (lossless, 12 MB
instead of 27), with the folder's other files copied. ``unpack DST``: the FLACs back to WAVs in
place, byte for byte the originals (the same samples in the same 16-bit PCM WAV layout): each one
is checked against the dataset's ``SHA256SUMS`` before the FLAC is removed, and seqlab checks them
again against its own manifest when it reads them.

    python benchmarks/fsdd_flac.py pack ../shared/data/fsdd .gpu-data/fsdd
    python benchmarks/fsdd_flac.py unpack .gpu-data/fsdd
"""

from __future__ import annotations

import hashlib
import io
import shutil
import sys
from pathlib import Path

import soundfile as sf


def pack(src: Path, dst: Path) -> None:
    (dst / "recordings").mkdir(parents=True, exist_ok=True)
    for item in src.iterdir():
        if item.is_file():
            shutil.copy2(item, dst / item.name)
    for wav in sorted((src / "recordings").glob("*.wav")):
        samples, rate = sf.read(wav, dtype="int16")
        if sf.info(wav).subtype != "PCM_16":
            raise SystemExit(f"{wav}: not 16-bit PCM ({sf.info(wav).subtype}); cannot pack")
        sf.write(dst / "recordings" / f"{wav.stem}.flac", samples, rate, format="FLAC")


def unpack(dst: Path) -> None:
    sums = {}
    for line in (dst / "SHA256SUMS").read_text().splitlines():
        digest, _, name = line.partition("  ")
        sums[Path(name.strip()).name] = digest
    flacs = sorted((dst / "recordings").glob("*.flac"))
    for flac in flacs:
        samples, rate = sf.read(flac, dtype="int16")
        buffer = io.BytesIO()
        sf.write(buffer, samples, rate, format="WAV", subtype="PCM_16")
        data = buffer.getvalue()
        name = f"{flac.stem}.wav"
        if hashlib.sha256(data).hexdigest() != sums.get(name):
            raise SystemExit(f"{flac}: the WAV rebuilt from it differs from the original {name}")
        (dst / "recordings" / name).write_bytes(data)
        flac.unlink()
    print(f"unpacked {len(flacs)} recordings into {dst / 'recordings'}")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "pack":
        pack(Path(sys.argv[2]), Path(sys.argv[3]))
    elif len(sys.argv) == 3 and sys.argv[1] == "unpack":
        unpack(Path(sys.argv[2]))
    else:
        raise SystemExit(__doc__)
