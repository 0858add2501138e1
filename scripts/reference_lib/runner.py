"""The reference GPT and its optimizer (world 1), driven on our weights and microbatches (GPU machine only).

The reference's training loss always runs its lm_head GEMMs in FP8 (FusedSoftcappedCrossEntropy; DISABLE_FP8 turns
off only the MLP's FP8). For an FP8-off comparison it is replaced by the same loss written from RECIPE §3.1-§3.2
without FP8: logits = x @ W in the activation dtype; s = σ((logits + 5)/7.5) in fp32, rounded to bf16 (§3.1);
z = 23·s; ℓ_t = Σ_k w_k (lse_t − z_t[target_{t+k}]) + w_P (lse_t − z_t[prefix_t]); its gradient follows §3.2's rule
(every MTP weight enters S_w, also for targets past the microbatch's end; ∂z/∂logits = (23/7.5)·s(1−s) with the
rounded s). The unmodified FP8 loss runs too, against our FP8 lm_head objective.

The f32 run (parameters and activations in fp32, attention by the dense path) gives each comparison its
self-difference; the bf16-only fused MLP kernel is replaced by its plain math relu(x @ W1ᵀ)² @ W2, and the layer-10
DC correction kernel, fp16/bf16 only, runs in bf16 between casts.
"""
import contextlib
import os

FLOAT_PARAMS_F32 = {"scalars", "post_lambdas", "resid_lambdas", "_mudd_gate_scale"}  # fp32 in the reference too
DC_KERNEL = "dc_attention_postonly_nodd_correction_add_base_triton"

# Rows of the exact loss per chunk: the f32 run at stage 2 (49,152 rows × 50,304 columns) would hold ≈ 10 GB per
# f32 logits-sized tensor and several for autograd, which does not fit an 80 GB H100 beside the f32 model; chunks
# under activation checkpointing keep one chunk's logits at a time (recomputed in the backward).
EXACT_LOSS_CHUNK_ROWS = 8192
SOFTCAP_A, SOFTCAP_B, SOFTCAP_C = 23.0, 5.0, 7.5


class Export:
    """Tensors of an export folder (raw little-endian files named by the manifest)."""

    def __init__(self, torch, export_dir):
        import numpy as np
        self.np, self.torch, self.dir = np, torch, export_dir

    def load(self, entry):
        np, torch = self.np, self.torch
        path = os.path.join(self.dir, entry["file"])
        kind = entry["dtype"]
        if kind == "bf16":
            t = torch.from_numpy(np.fromfile(path, dtype="<u2").view(np.int16)).view(torch.bfloat16)
        elif kind == "u16":  # NorMuon mantissas: widened so that bit operations stay unsigned
            t = torch.from_numpy(np.fromfile(path, dtype="<u2").astype(np.int32))
        else:
            t = torch.from_numpy(np.fromfile(path, dtype={"f32": "<f4", "i32": "<i4", "i64": "<i8"}[kind]))
        return t.reshape(entry["shape"])

    def precise(self, entry):
        """A bf16 bank with its NorMuon mantissa as the fp32 value the optimizer keeps (§4.3); else the tensor."""
        value = self.load(entry)
        if "mantissa" not in entry:
            return value.float()
        return fp32_from_bf16_and_mantissa(self.torch, value, self.load(entry["mantissa"]))

    def weights(self, entries):
        """reference name -> tensor for a parameter list of the manifest."""
        return {e["reference_name"]: self.load(e) for e in entries}


def fp32_from_bf16_and_mantissa(torch, high, low):
    """(bf16 bits << 16) | mantissa as fp32 (§4.3). high: bf16 tensor; low: the mantissa, any integer dtype."""
    high_bits = high.contiguous().view(torch.int16).to(torch.int32) & 0xFFFF
    low_bits = low.to(device=high.device, dtype=torch.int32).reshape(high.shape) & 0xFFFF
    return ((high_bits << 16) | low_bits).view(torch.float32)


def exact_loss_class(torch):
    """RECIPE §3.1-§3.2's training loss without FP8, as a drop-in for the reference's FusedSoftcappedCrossEntropy."""
    from torch.utils.checkpoint import checkpoint

    class RoundedSoftcap(torch.autograd.Function):
        """z = A·bf16(σ((logits + B)/C)) (§3.1); backward (A/C)·s(1−s) with the rounded s (§3.2)."""

        @staticmethod
        def forward(ctx, logits):
            s = torch.sigmoid((logits.float() + SOFTCAP_B) / SOFTCAP_C).bfloat16().float()
            ctx.save_for_backward(s)
            ctx.logits_dtype = logits.dtype
            return SOFTCAP_A * s

        @staticmethod
        def backward(ctx, grad):
            (s,) = ctx.saved_tensors
            return (grad * (SOFTCAP_A / SOFTCAP_C) * s * (1 - s)).to(ctx.logits_dtype)

    def chunk_loss(x, lm_head_weight, begin, targets, weights, prefix_targets, prefix_weight):
        """The loss of rows [begin, begin + len(x)): MTP target k of row i is targets[i + k] (dropped past the end,
        where a term of value 0 still adds w_k·softmax to the gradient, §3.2's S_w)."""
        rows_total = targets.shape[0]
        z = RoundedSoftcap.apply(x @ lm_head_weight.type_as(x))
        lse = torch.logsumexp(z, dim=-1)
        rows, vocab = z.shape
        loss = torch.zeros(rows, dtype=torch.float32, device=z.device)
        for k, w in enumerate(weights):
            if w == 0:
                continue
            n = max(0, min(rows, rows_total - k - begin))
            if n > 0:
                target = targets[begin + k:begin + k + n]
                valid = (target >= 0) & (target < vocab)
                picked = z[:n].gather(1, target.clamp(0, vocab - 1).long()[:, None])[:, 0]
                loss = loss + torch.nn.functional.pad(w * torch.where(valid, lse[:n] - picked, 0.0), (0, rows - n))
            if n < rows:  # targets past the microbatch's end: value 0, gradient w·softmax
                dropped = lse[n:] - lse[n:].detach()
                loss = loss + torch.nn.functional.pad(w * dropped, (n, 0))
        if prefix_targets is not None and prefix_weight is not None:
            target = prefix_targets[begin:begin + rows]
            valid = (target >= 0) & (target < vocab)
            picked = z.gather(1, target.clamp(0, vocab - 1).long()[:, None])[:, 0]
            loss = loss + prefix_weight.float().reshape(()) * torch.where(valid, lse - picked, 0.0)
        return loss

    class ExactSoftcappedCrossEntropy:
        @staticmethod
        def apply(x, targets, mtp_weights, prefix_targets, prefix_weight, lm_head_weight, x_s, w_s, grad_s,
                  grad_scale, A=SOFTCAP_A, B=SOFTCAP_B, C=SOFTCAP_C):
            if (A, B, C) != (SOFTCAP_A, SOFTCAP_B, SOFTCAP_C):
                raise NotImplementedError(f"exact loss: softcap constants {(A, B, C)}")
            weights = mtp_weights.float().tolist() if mtp_weights is not None else [1.0]
            parts = []
            for begin in range(0, x.shape[0], EXACT_LOSS_CHUNK_ROWS):
                xc = x[begin:begin + EXACT_LOSS_CHUNK_ROWS]
                parts.append(checkpoint(chunk_loss, xc, lm_head_weight, begin, targets, weights, prefix_targets,
                                        prefix_weight, use_reentrant=False))
            return torch.cat(parts)
    return ExactSoftcappedCrossEntropy


def f32_stand_ins(torch, kernels):
    """For the f32 self-difference run only (see the module's text)."""
    dc = kernels[DC_KERNEL]

    def mlp(x, w1, w2, *fp8_args):
        return torch.relu(x @ w1.type_as(x).T).square() @ w2.type_as(x)

    def dc_in_bf16(base_out, q, k, v, dc_weights, *args, **kwargs):
        if base_out.dtype != torch.float32:
            return dc(base_out, q, k, v, dc_weights, *args, **kwargs)
        b = [t.bfloat16() for t in (base_out, q, k, v)]
        return dc(*b, tuple(w.bfloat16() for w in dc_weights), *args, **kwargs).float()

    return {"ReLUSqrdMLP": mlp, DC_KERNEL: dc_in_bf16}


def f32_polar_express(coefficients):
    """RECIPE §4.3 steps 1-3 (Nesterov momentum, normalisation, the Polar Express iterations) in fp32, with the
    signature of the reference's bf16 `polar_express`. The optimizer-alone NorMuon rows run the reference's
    optimizer once as it is and once with this in its place: their difference is the reference's own bf16-vs-f32
    spread, which sets those rows' tolerance as the f32 run does for every other row."""

    def polar_express(grad_chunk, momentum_buffer, momentum_t, split_baddbmm=False):
        momentum = float(momentum_t)
        momentum_buffer.lerp_(grad_chunk, 1 - momentum)
        x = grad_chunk.lerp_(momentum_buffer, momentum).float()
        x = x / (x.norm(dim=(-2, -1), keepdim=True) * (1 + 2e-2) + 1e-6)
        tall = x.size(-2) > x.size(-1)
        for a, b, c in coefficients:
            gram = x.mT @ x if tall else x @ x.mT
            poly = b * gram + c * (gram @ gram)
            x = a * x + (x @ poly if tall else poly @ x)
        return x

    return polar_express


class ReferenceRunner:
    """The reference GPT and its optimizer (world 1), loaded with our weights in bf16 or f32."""

    def __init__(self, torch, ref, manifest, export):
        self.torch, self.ref, self.manifest, self.export = torch, ref, manifest, export
        m = manifest["model"]
        self.model = ref.GPT(vocab_size=50257, num_layers=m["num_layers"], num_heads=m["num_heads"],
                             head_dim=m["head_dim"], model_dim=m["model_dim"],
                             max_seq_len=ref.args.val_batch_size // (ref.grad_accum_steps * ref.world_size)).cuda()
        self.params = dict(self.model.named_parameters())
        self.initial = export.weights(manifest["initial"])
        self.buffers = {e["reference_name"]: export.load(e) for e in manifest["buffers"]}
        self.exact_loss = exact_loss_class(torch)
        self.fp8_loss = ref.FusedSoftcappedCrossEntropy
        self.bf16_kernels = {"ReLUSqrdMLP": ref.ReLUSqrdMLP, DC_KERNEL: getattr(ref, DC_KERNEL)}
        self.f32_kernels = f32_stand_ins(torch, self.bf16_kernels)

    @contextlib.contextmanager
    def polar_express_in_f32(self):
        """The reference's optimizer with f32_polar_express in place of its bf16 Polar Express, for the block."""
        original = self.ref.polar_express
        self.ref.polar_express = f32_polar_express(self.ref.polar_express_coeffs)
        try:
            yield
        finally:
            self.ref.polar_express = original

    def use_kernels(self, mode):
        """The reference's bf16-only Triton kernels in bf16 mode; fp32 stand-ins in f32 mode."""
        for name, fn in (self.f32_kernels if mode == "f32" else self.bf16_kernels).items():
            setattr(self.ref, name, fn)

    def dtype_for(self, name, mode):
        if mode == "f32" or name in FLOAT_PARAMS_F32:
            return self.torch.float32
        return self.torch.bfloat16

    def load_weights(self, weights, mode):
        """weights: reference name -> tensor. Replaces .data, so the optimizer keeps its parameter objects."""
        for name, value in weights.items():
            p = self.params.get(name)
            if p is None:
                raise KeyError(f"the reference has no parameter '{name}'")
            if list(p.shape) != list(value.shape):
                raise ValueError(f"{name}: ours {list(value.shape)} reference {list(p.shape)}")
            p.grad = None
            p.data = value.to(device="cuda", dtype=self.dtype_for(name, mode)).contiguous()
        sign = self.buffers["bigram_sign_table"]
        self.model.bigram_sign_table = sign.to("cuda", self.torch.bfloat16 if mode == "bf16" else self.torch.float32)
        self.model.prefix_table.copy_(self.buffers["prefix_table"].to("cuda"))
        self.use_kernels(mode)

    def snapshot(self, grads=False):
        out = {}
        for name, p in self.params.items():
            t = p.grad if grads else p.data
            out[name] = None if t is None else t.detach().float().cpu()
        return out

    def fresh_manager(self, step):
        """A new optimizer (world 1, as the reference's training code builds it) with the YaRN state of `step`."""
        ref = self.ref
        manager = ref.TrainingManager(self.model)
        for start, _ in ref.training_schedule.boundaries:
            if start <= step:
                manager.advance_schedule(start)
        manager.advance_schedule(step)
        return manager

    def forward_args(self, schedule):
        torch = self.torch
        return self.ref.ForwardScheduleConfig(
            mtp_weights=torch.tensor(schedule["mtp_weights"], dtype=torch.float32, device="cuda"),
            prefix_weight=torch.tensor([schedule["prefix_weight"]], dtype=torch.float32, device="cuda"),
            ws_short=int(schedule["ws_short_tokens"]), ws_long=int(schedule["ws_long_tokens"]),
            train_max_seq_len=int(schedule["train_max_seq_len"]))

    def batch(self, batch, source=None):
        """A microbatch's (inputs, targets, cu_seqlens, bigram ids) on the GPU, from `source` (an Export; default
        the export the runner was built on)."""
        load = (source or self.export).load
        return (load(batch["inputs"]).cuda(), load(batch["targets"]).cuda(), load(batch["cu_seqlens"]).cuda(),
                load(batch["bigram_ids"]).cuda())

    def train_loss(self, batch, forward_args, fp8=False):
        """forward(...).sum() * grad_scale, as the reference's training loop computes it; backward unless fp8.
        `batch`: (inputs, targets, cu_seqlens, bigram ids) on the GPU."""
        self.ref.FusedSoftcappedCrossEntropy = self.fp8_loss if fp8 else self.exact_loss
        self.model.train()
        try:
            if fp8:
                with self.torch.no_grad():
                    return (self.model(*batch, forward_args).sum() * self.ref.grad_scale).item()
            loss = self.model(*batch, forward_args).sum() * self.ref.grad_scale
            loss.backward()
            return loss.item()
        finally:
            self.ref.FusedSoftcappedCrossEntropy = self.exact_loss

    def val_losses(self, batch, forward_args):
        """Per-position validation losses of a window (eval mode: next token only, §3.4)."""
        self.model.eval()
        with self.torch.no_grad():
            out = self.model(*batch, forward_args).float().cpu()
        self.model.train()
        return out
