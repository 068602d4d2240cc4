"""Boltzmann attention in a nanoGPT-style causal self-attention block: the
softmax line is replaced by boltzmann_attention and the block gains
learnable couplings J, one [T, T] matrix per head. docs/python.md shows
the lines marked "swap"; tests/python.sh runs this file."""
import torch
from torch import nn

from boltzattn.torch import boltzmann_attention


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        self.n_head = n_head
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.J = nn.Parameter(torch.zeros(n_head, block_size, block_size))  # swap: couplings

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        # was: y = softmax(q @ k^T / sqrt(d) + causal mask) @ v
        y = boltzmann_attention(q, k, v, self.J[:, :T, :T])  # swap: Boltzmann attention
        return self.c_proj(y.transpose(1, 2).reshape(B, T, C))


torch.manual_seed(0)
block = CausalSelfAttention(n_embd=32, n_head=4, block_size=16)
x = torch.randn(8, 16, 32)
y = block(x)
y.square().mean().backward()
print("out", tuple(y.shape), "|dJ| = %.3e" % block.J.grad.norm().item())
assert torch.isfinite(y).all() and block.J.grad.norm() > 0
