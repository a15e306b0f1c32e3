"""A two-process DistributedDataParallel training step, for the generated multi-GPU tests.

Each process puts the op between two linear layers (an op of n inputs takes the first layer's
output cut into n equal parts), runs its half of a batch through DDP and
backpropagates; DDP averages the gradients across processes. The averaged gradients must equal
those of one float64 copy of the network, built on the op's PyTorch reference, on the whole batch.
On CUDA each process owns one GPU and talks NCCL; on the CPU the same step runs over gloo, so
the check itself is exercised where there is no GPU.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

WORLD_SIZE = 2
# HIDDEN splits evenly into the inputs of any op of up to 8.
FEATURES, HIDDEN, OUTPUTS, BATCH_PER_PROCESS = 48, 840, 8, 8


def _resolve(dotted: str) -> Callable[..., torch.Tensor]:
    """``"package.module:function"`` to the function."""
    module_name, _, attribute = dotted.partition(":")
    function: Callable[..., torch.Tensor] = getattr(importlib.import_module(module_name), attribute)
    return function


class _Apply(torch.nn.Module):
    """A function of ``inputs`` tensors with fixed keyword arguments, as a layer."""

    def __init__(self, function: Callable[..., torch.Tensor], inputs: int, params: dict[str, Any]) -> None:
        super().__init__()
        self.function, self.inputs, self.params = function, inputs, params

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.function(*hidden.chunk(self.inputs, dim=-1), **self.params)


def _network(function: Callable[..., torch.Tensor], inputs: int, params: dict[str, Any]) -> torch.nn.Sequential:
    torch.manual_seed(0)  # the same weights in every process and for the reference copy
    return torch.nn.Sequential(
        torch.nn.Linear(FEATURES, HIDDEN),
        _Apply(function, inputs, params),
        torch.nn.Linear(HIDDEN // inputs, OUTPUTS),
    )


def _training_step(
    rank: int, device_type: str, rendezvous: str, op: str, reference: str, inputs: int, params: dict[str, Any]
) -> None:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    if device_type == "cuda":
        torch.cuda.set_device(rank)
        device, backend = torch.device("cuda", rank), "nccl"
    else:
        device, backend = torch.device("cpu"), "gloo"
    dist.init_process_group(backend, init_method=f"file://{rendezvous}", rank=rank, world_size=WORLD_SIZE)
    try:
        generator = torch.Generator().manual_seed(1)
        samples = torch.randn(WORLD_SIZE * BATCH_PER_PROCESS, FEATURES, generator=generator).to(device)
        targets = torch.randn(WORLD_SIZE * BATCH_PER_PROCESS, OUTPUTS, generator=generator).to(device)
        mine = slice(rank * BATCH_PER_PROCESS, (rank + 1) * BATCH_PER_PROCESS)

        network = _network(_resolve(op), inputs, params).to(device)
        parallel = DistributedDataParallel(network, device_ids=[rank] if device_type == "cuda" else None)
        loss = torch.nn.functional.mse_loss(parallel(samples[mine]), targets[mine])
        loss.backward()  # DDP all-reduces (averages) the gradients here

        expected = _network(_resolve(reference), inputs, params).to(device=device, dtype=torch.float64)
        torch.nn.functional.mse_loss(expected(samples.double()), targets.double()).backward()

        for (name, actual), reference_parameter in zip(network.named_parameters(), expected.parameters(), strict=True):
            assert actual.grad is not None and reference_parameter.grad is not None, f"{name} got no gradient"
            try:
                torch.testing.assert_close(actual.grad.double(), reference_parameter.grad, rtol=2e-4, atol=2e-6)
            except AssertionError as mismatch:
                raise AssertionError(f"rank {rank}: DDP gradient of {name} differs from the reference: {mismatch}") from None
    finally:
        dist.destroy_process_group()


def check_ddp_training_step(
    *, op: str, reference: str, params: dict[str, Any], device_type: str, scratch: Path, inputs: int = 1
) -> None:
    """Run the two-process step; raises (with the failing process's traceback) on any mismatch.

    ``op`` and ``reference`` are ``"module:function"`` names the worker processes import; both
    take ``inputs`` tensors.
    """
    if not 1 <= inputs <= 8 or HIDDEN % inputs:
        raise ValueError(f"the DDP check takes ops of 1 to 8 tensor inputs, not {inputs}")
    import torch.multiprocessing as multiprocessing

    if device_type == "cuda" and torch.cuda.device_count() < WORLD_SIZE:
        raise RuntimeError(f"the CUDA DDP check needs {WORLD_SIZE} GPUs, found {torch.cuda.device_count()}")
    rendezvous = scratch / "ddp-rendezvous"
    rendezvous.unlink(missing_ok=True)
    # CUDA processes are spawned (CUDA cannot follow a fork). CPU processes fork from a server that
    # imported torch once (per test process): a fresh interpreter importing torch for each process of
    # each check costs seconds, and the CPU check runs in every op's suite.
    if device_type != "cuda":
        multiprocessing.set_forkserver_preload(["torch", "torch.distributed", "torch.nn.parallel"])
    multiprocessing.start_processes(
        _training_step,
        args=(device_type, str(rendezvous), op, reference, inputs, params),
        nprocs=WORLD_SIZE,
        join=True,
        start_method="spawn" if device_type == "cuda" else "forkserver",
    )
