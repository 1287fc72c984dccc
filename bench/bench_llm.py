"""pxp's own overhead around an LLM call: ASSEMBLE_PROMPT, request building and parsing.

Runs the LLM machine-agent (real anthropic / openai SDKs) against the local
wire-format test server, which answers at once, and prints per-ask wall time p50/p95
(ms) for a RAD instance with a 1568 px image and 0, 10 and 40 carried sessions; the
server's own time is included, so the figures bound pxp's overhead from above.
Goal: a few ms per ask, small next to a real model's seconds.

    python bench/bench_llm.py [--asks 30]
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import time

import checkout  # noqa: F401  (this checkout on the import path)
from PIL import Image

from pxp.agents.base import Answer, CarriedSession, InstanceView, Query
from pxp.agents.llm import LLMMachine
from pxp.llm.base import ProviderOptions
from pxp.llm.registry import make_provider
from pxp.protocols.pxp.rules import Msg, Sender, Tag
from pxp.tasks.rad import rad_spec
from tests.llm_server import FakeLLM, answer


def _image() -> bytes:
    buf = io.BytesIO()
    Image.new("L", (2400, 2000), 90).save(buf, format="PNG")
    return buf.getvalue()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--asks", type=int, default=30)
    args = ap.parse_args()
    os.environ.setdefault("ANTHROPIC_API_KEY", "bench-not-a-key")
    os.environ.setdefault("OPENAI_API_KEY", "bench-not-a-key")
    img = _image()
    x = InstanceView(1, "x", "rad", "", "Pneumonia", Answer("Pneumonia", "ref"), asset_sha256="b" * 64,
                     load_image=lambda: img)
    past = tuple(Msg(j, Sender.MACHINE if j % 2 else Sender.HUMAN, Tag.INIT if j == 1 else Tag.REFUTE,
                     "Pneumonia", "patchy consolidation in the left lower zone " * 4, False, False, False)
                 for j in range(1, 5))
    with FakeLLM(lambda req: answer("Pneumonia", "patchy consolidation")) as server:
        for spec in ("anthropic:claude-sonnet-4-6", "openai:gpt-4o"):
            url = server.url if spec.startswith("anthropic") else server.openai_url
            machine = LLMMachine(make_provider(spec, ProviderOptions(base_url=url)), rad_spec())
            for carried in (0, 10, 40):
                carry = [CarriedSession(i, x, past) for i in range(carried)]
                times = []
                for _ in range(args.asks):
                    q = Query(instance=x, sender=Sender.MACHINE, j=1, n=10, k=3, history=(), carry=carry,
                              session_id=1)
                    t0 = time.perf_counter()
                    machine.ask(q)
                    times.append((time.perf_counter() - t0) * 1000)
                times.sort()
                p95 = times[max(0, int(len(times) * 0.95) - 1)]
                size = len(server.requests[-1].body.__repr__())
                print(f"{spec:30s} carried {carried:3d}: ask p50 {statistics.median(times):6.2f} ms, "
                      f"p95 {p95:6.2f} ms, request ~{size / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
