"""Time to the first visible machine text, streamed and not (README "The app": the reply streams in).

Against the local wire-format server (tests/llm_server.py) injecting a realistic latency: 800 ms to
the first token, then 40 tokens/s for a 300-token reply (a piece of 12 characters, about 3 tokens,
every 75 ms). Prints, per API, the p50/p95 of Send → first text and Send → whole reply, streamed
and unstreamed. Usage: python bench/bench_stream.py [--calls N]
"""

from __future__ import annotations

import argparse
import os
import time

import checkout  # noqa: F401  (this checkout on the import path)

from pxp.llm.base import Prompt, ProviderOptions, TextPart, Turn
from pxp.llm.registry import make_provider
from tests.llm_server import FakeLLM, Reply, Request

REPORT = ("Frontal chest radiograph. Patchy airspace consolidation in the left lower zone with air "
          "bronchograms; no effusion, heart size normal. ") * 8  # about 300 tokens


def reply(req: Request) -> Reply:
    first, pieces = 0.8, max(1, len(REPORT) // 12)
    per_piece = (300 / 40) / pieces  # 40 tokens/s over the whole reply
    if req.body.get("stream"):
        return Reply(text=f"Prediction: Pneumonia\nExplanation: {REPORT}", first_delay=first, piece_delay=per_piece)
    time.sleep(first + 300 / 40)
    return Reply(text=f"Prediction: Pneumonia\nExplanation: {REPORT}")


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=5)
    args = ap.parse_args()
    with FakeLLM(reply) as server:
        os.environ.update(ANTHROPIC_API_KEY="sk-bench-not-a-key", OPENAI_API_KEY="sk-bench-not-a-key",
                          ANTHROPIC_BASE_URL=server.url, OPENAI_BASE_URL=server.openai_url)
        prompt = Prompt(system="s", turns=[Turn("user", [TextPart("case")])])
        print(f"{'API':<10} {'mode':<10} {'first text p50/p95 (s)':>24} {'whole reply p50/p95 (s)':>25}")
        for spec in ("anthropic:claude-sonnet-4-6", "openai:gpt-4.1"):
            provider = make_provider(spec, ProviderOptions(max_retries=0))
            for mode in ("unstreamed", "streamed"):
                firsts, wholes = [], []
                for _ in range(args.calls):
                    t0 = time.perf_counter()
                    first: list[float] = []

                    def seen(_text: str, t0: float = t0, first: list[float] = first) -> None:
                        if not first:
                            first.append(time.perf_counter() - t0)

                    sink = {"on_text": seen} if mode == "streamed" else {}
                    provider.complete(prompt, max_tokens=300, **sink)  # type: ignore[arg-type]
                    whole = time.perf_counter() - t0
                    firsts.append(first[0] if first else whole)
                    wholes.append(whole)
                print(f"{spec.split(':')[0]:<10} {mode:<10} {pct(firsts, .5):>11.2f} / {pct(firsts, .95):<10.2f}"
                      f" {pct(wholes, .5):>12.2f} / {pct(wholes, .95):<10.2f}")
        print(f"{args.calls} calls each; latency injected: 0.80 s to the first token, then 40 tokens/s for 300 tokens")


if __name__ == "__main__":
    main()
