"""Decode attention alone over a float16 and a q8 KV cache, alternating calls (s10-kvq8).

SmolLM2's form (3 kv heads x 3 query rows x head dim 64, cache of 2048 positions), the fused
attention compiled by itself (the VM call included: the 1-key row is that overhead), one thread's
CPU time. "warm": one cache, called again and again; "cold": 30 caches cycled with a layer's share
of a decode step's weights (3.2 MB) streamed between calls, as in the engine.

    PYTHONPATH=src:. python benchmarks/bench_kv_cache_q8.py
"""
import os
import sys
import time

os.environ["RELAXSCRIPT_NUM_THREADS"] = "1"
sys.path[:0] = [os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")]
import numpy as np  # noqa: E402

import relaxscript as rx  # noqa: E402
import tests.backends.test_c_attention_decode as f16t  # noqa: E402
import tests.backends.test_c_attention_q8 as q8t  # noqa: E402
CAP = 2048
f16t.CAPACITY = CAP; q8t.CAPACITY = CAP
f16 = rx.VirtualMachine(rx.build(rx.from_source(f16t._source(3, 3, 64, "float16")), target="c"))["main"]
q8 = rx.VirtualMachine(rx.build(rx.from_source(q8t._source(3, 3, 64, 1)), target="c"))["main"]
rng = np.random.default_rng(0)
L = 30
q = rng.standard_normal((3, 3, 1, 64)).astype(np.float32)
kh = [rng.standard_normal((3, 64, CAP)).astype(np.float16) for _ in range(L)]
vh = [rng.standard_normal((3, CAP, 64)).astype(np.float16) for _ in range(L)]
kq = [rng.integers(-127, 128, (3, 64, CAP)).astype(np.int8) for _ in range(L)]
vq = [rng.integers(-127, 128, (3, CAP, 64)).astype(np.int8) for _ in range(L)]
ks = [rng.uniform(0.01, 0.02, (3, 1, CAP)).astype(np.float32) for _ in range(L)]
vs = [rng.uniform(0.01, 0.02, (3, CAP, 1)).astype(np.float32) for _ in range(L)]
qq = q.reshape(3, 3, 64)
junk = np.ones(96 << 20 >> 2, np.float32)   # 96 MB streamed between cold calls (a decode step's weights)
step = junk.size // L
for m in (1, 256, 1024):
    for mode in ("warm", "cold"):
        t = {"f16": [], "q8": []}
        for r in range(200 if mode == "warm" else 60):
            i = 0 if mode == "warm" else r % L
            for name in (("f16", "q8") if r % 2 else ("q8", "f16")):
                if mode == "cold":   # a layer's share of the weights streamed between two layers' attention
                    junk[(r % L) * step:(r % L + 1) * step].sum()
                s = time.thread_time()
                if name == "f16":
                    f16(q, kh[i], vh[i], (m - 1,))
                else:
                    q8(qq, kq[i], vq[i], ks[i], vs[i], (m - 1,))
                t[name].append(time.thread_time() - s)
        print(f"{m} keys {mode}: " + "; ".join(f"{n} median {np.median(v)*1e6:.1f} us min {np.min(v)*1e6:.1f}"
                                              for n, v in t.items()), f"load {os.getloadavg()[0]:.1f}", flush=True)
