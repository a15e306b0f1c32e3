import time, torch, torch.nn.functional as F, sys
sys.path.insert(0, "/tmp/opgen-gpu")
from generated_ops.layernorm import layernorm
from generated_ops.add_rmsnorm import add_rmsnorm
for rows, cols, dt in [(4, 64, torch.float32), (8, 4096, torch.bfloat16)]:
    x = torch.randn(rows, cols, device="cuda", dtype=dt, requires_grad=True)
    w = torch.randn(cols, device="cuda", dtype=dt, requires_grad=True); b = torch.randn(cols, device="cuda", dtype=dt, requires_grad=True)
    r = torch.randn(rows, cols, device="cuda", dtype=dt, requires_grad=True)
    cases = {"layernorm step": lambda: layernorm(x, w, b).sum().backward(),
             "F.layer_norm step": lambda: F.layer_norm(x, (cols,), w, b).sum().backward(),
             "add_rmsnorm step": lambda: sum(t.sum() for t in add_rmsnorm(x, r, w)).backward(),
             "eager add+rms_norm step": lambda: (lambda s: (F.rms_norm(s, (cols,), w).sum() + s.sum()).backward())(x + r)}
    for name, f in cases.items():
        for _ in range(100): f()
        torch.cuda.synchronize(); best = []
        for _ in range(5):
            t = time.perf_counter()
            for _ in range(300): f()
            torch.cuda.synchronize(); best.append((time.perf_counter() - t) / 300 * 1e6)
        print(f"{rows}x{cols} {str(dt)[6:]:9s} {name:24s} {min(best):7.1f} us a step (host-bound: queued back to back)")
