#!/usr/bin/env bash
# vitkd's FLOP count (ModelSpec::forward_flops, the base of flops_per_sample
# and of every MFU figure) against an independent counter: PyTorch's
# torch.utils.flop_counter.FlopCounterMode, counting the matrix products that
# analysis/vitkd_model.py's ViT runs for one image. vitkd's last block computes
# its queries, projection and MLP on the head tokens only, so the PyTorch side
# runs that block the same way (q of the head tokens against k, v of all), built
# from the same modules; every other layer is vitkd_model.py's own forward.
# Three shapes: class token only, with the distillation token (two head
# tokens, two heads), and an MLP ratio that rounds.
#   e2e_flops_torch2.sh WORKDIR     (env: VITKD, SRC, VITKD_TORCH2_PYTHON)
# Needs PyPI's torch 2.x (FlopCounterMode): exit 77 (skipped) unless
# VITKD_TORCH2_PYTHON names its interpreter (jobs/setup-torch2.sh makes one).
source "$(dirname "$0")/../lib/common.sh"
if [ -z "${VITKD_TORCH2_PYTHON:-}" ]; then
  echo "skip: VITKD_TORCH2_PYTHON is not set (the interpreter of a venv with PyPI's torch 2.x)"
  exit 77
fi
work=$1
rm -rf "$work" && mkdir -p "$work" && cd "$work"
synthetic syn.h5 64 32 16 4
shapes=("model.dim=32 model.depth=2 model.heads=2 model.mlp_ratio=3.0"
        "model.dim=48 model.depth=3 model.heads=3 model.mlp_ratio=2.0 model.dist_token=true"
        "model.dim=40 model.depth=1 model.heads=4 model.mlp_ratio=2.3 model.patch=2")
i=0
for s in "${shapes[@]}"; do
  i=$((i + 1))
  # shellcheck disable=SC2086  # the shape is a list of keys
  tiny_config run$i.toml model.image_size=16 train.max_steps=1 train.final_eval=false train.threads=1 \
    "run.out_dir=\"run$i\"" $s
  LOG=run$i.log expect 0 "$VITKD" train run$i.toml
done
"$VITKD_TORCH2_PYTHON" - "$SRC/analysis" "${#shapes[@]}" <<'PY'
import json, sys, tomllib
sys.path.insert(0, sys.argv[1])
import torch
from torch.utils.flop_counter import FlopCounterMode
import vitkd_model

def last_block_on_head_tokens(blk, x, q_tokens):
    """vitkd's last block: queries, proj and MLP for the first q_tokens tokens only."""
    b, t, d = x.shape
    a = blk.attn
    h = blk.norm1(x)
    w, bias = a.qkv.weight, a.qkv.bias
    q = torch.nn.functional.linear(h[:, :q_tokens], w[:d], bias[:d])
    kv = torch.nn.functional.linear(h, w[d:], bias[d:])
    hd = d // a.heads
    q = q.reshape(b, q_tokens, a.heads, hd).transpose(1, 2)
    k, v = kv.reshape(b, t, 2, a.heads, hd).permute(2, 0, 3, 1, 4)
    o = torch.matmul(torch.matmul(q * a.scale, k.transpose(-2, -1)).softmax(-1), v)
    y = x[:, :q_tokens] + a.proj(o.transpose(1, 2).reshape(b, q_tokens, d))
    return y + blk.mlp(blk.norm2(y))

def counted_flops(m, spec):
    img = torch.zeros(1, spec["channels"], spec["image_size"], spec["image_size"])
    heads = 2 if spec["dist_token"] else 1
    with torch.no_grad(), FlopCounterMode(display=False) as fc:
        x = m.patch_embed(img)
        toks = [m.cls_token.expand(1, -1, -1)] + ([m.dist_token.expand(1, -1, -1)] if m.has_dist else [])
        x = torch.cat(toks + [x], dim=1) + m.pos_embed
        for blk in m.blocks[:-1]:
            x = blk(x)
        x = m.norm(last_block_on_head_tokens(m.blocks[-1], x, heads))
        logits = m.head(x[:, 0])
        if m.has_dist:
            logits = (logits + m.head_dist(x[:, 1])) * 0.5
    return fc.get_total_flops()

bad = 0
for i in range(1, int(sys.argv[2]) + 1):
    cfg = tomllib.load(open(f"run{i}.toml", "rb"))["model"]
    spec = {k: cfg[k] for k in vitkd_model.SPEC_KEYS}
    spec["dist_token"] = cfg.get("dist_token", False)
    m = vitkd_model.ViT(**spec).eval()
    torch_flops = counted_flops(m, spec)
    vitkd_flops = json.load(open(f"run{i}/result.json"))["flops_per_sample"] / 3  # forward + backward = 3 x
    ok = abs(vitkd_flops - torch_flops) <= 1e-9 * torch_flops
    bad += not ok
    print(f"{'ok  ' if ok else 'FAIL'} {spec}: vitkd {vitkd_flops:.0f}, FlopCounterMode {torch_flops}")
sys.exit(1 if bad else 0)
PY
