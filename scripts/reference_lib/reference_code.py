"""Loads the PyTorch record code (REF_DIR/train_gpt.py) at run time on the GPU machine, in a world of 1, offline.

Nothing of it is part of this project: only the part that defines its classes (everything before "# begin logging")
is executed, with two stand-ins:
  - `kernels.get_kernel` (a hub download of FA3) returns an object whose `flash_attn_varlen_func` calls
    torch.nn.attention.varlen.varlen_attn (bf16) or a dense per-sequence attention (f32, or attention="dense");
  - tiktoken's GPT-2 encoding comes from its cache when present, else from our r50k_base.tiktoken (the same
    mergeable ranks), so the reference's prefix table can be built offline.
"""
import os
import socket
import sys
import types


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dense_varlen_attention(torch, q, k, v, cu, scale, left_window):
    """Causal attention per sequence of cu (keys i − left_window … i; left_window < 0: no limit), in q's dtype."""
    F = torch.nn.functional
    bounds = [int(c) for c in cu.tolist()]
    pieces = []
    for a, b in zip(bounds[:-1], bounds[1:]):
        if b <= a:
            continue
        n = b - a
        i = torch.arange(n, device=q.device)
        allowed = i[:, None] >= i[None, :]
        if left_window >= 0:
            allowed = allowed & (i[:, None] - i[None, :] <= left_window)
        qs, ks, vs = (t[a:b].transpose(0, 1) for t in (q, k, v))  # [H, n, D]
        pieces.append(F.scaled_dot_product_attention(qs, ks, vs, attn_mask=allowed, scale=scale).transpose(0, 1))
    out = torch.cat(pieces, dim=0)
    if out.size(0) != q.size(0):
        raise RuntimeError(f"dense attention: cu_seqlens cover {out.size(0)} of {q.size(0)} rows")
    return out


ATTENTION = {"mode": "varlen"}  # switched to "dense" when varlen_attn fails on the device


def attention_module(torch):
    """A stand-in for the hub's FA3 interface: flash_attn_varlen_func with the reference's call signature."""
    import inspect
    try:
        from torch.nn.attention.varlen import varlen_attn
        accepted = inspect.signature(varlen_attn).parameters
    except ImportError as e:
        print(f"note: torch.nn.attention.varlen is unavailable ({e}); attention takes the dense path")
        ATTENTION["mode"] = "dense"

    def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=True,
                               softmax_scale=None, window_size=(-1, -1), **unused):
        if not causal or window_size[1] != 0 and window_size[1] != -1:
            raise NotImplementedError(f"attention stand-in: causal={causal} window={window_size}")
        left = int(window_size[0])
        scale = softmax_scale if softmax_scale is not None else q.size(-1) ** -0.5
        if ATTENTION["mode"] == "dense" or q.dtype == torch.float32:
            return dense_varlen_attention(torch, q, k, v, cu_seqlens_q, scale, left)
        kwargs = {"window_size": (left, 0)}
        if "scale" in accepted:
            kwargs["scale"] = scale
        else:
            q = q * (scale * q.size(-1) ** 0.5)
        out = varlen_attn(q, k, v, cu_seqlens_q.int(), cu_seqlens_k.int(), int(max_seqlen_q), int(max_seqlen_k),
                          **kwargs)
        return out[0] if isinstance(out, tuple) else out

    return types.SimpleNamespace(flash_attn_varlen_func=flash_attn_varlen_func)


def gpt2_ranks_from_file():
    """bytes -> rank from SPEEDRUN_TOKENIZER or data/tokenizer/r50k_base.tiktoken (lines "base64 rank"), or None."""
    import base64
    checkout = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = os.environ.get("SPEEDRUN_TOKENIZER") or os.path.join(checkout, "data", "tokenizer", "r50k_base.tiktoken")
    try:
        with open(path, "rb") as f:
            return {base64.b64decode(token): int(rank) for token, rank in (line.split() for line in f if line.strip())}
    except (OSError, ValueError) as e:
        print(f"note: no GPT-2 ranks file ({path}: {e}); the prefix table is not compared")
        return None


# Eager-mode corrections of the record code's source, applied before it runs. The record run compiles the whole
# model (torch.compile after "# begin logging"), where these statements mean what they say; the check runs the model
# eagerly, where they do not. Each (old, new, why) must match exactly once, or loading fails: a different version of
# the reference needs looking at again.
EAGER_FIXES = [
    ("k[:, 1:, :, self.head_dim // 2:] = k[:, :-1, :, self.head_dim // 2:]",
     "k[:, 1:, :, self.head_dim // 2:] = k[:, :-1, :, self.head_dim // 2:].clone()",
     "the key offset (RECIPE §2.9 step 5) copies k onto itself shifted by one token; eagerly the two views overlap "
     "and the element-wise copy kernel reads positions it has already overwritten (about a quarter of the stationary "
     "halves get k[t-2], the rest race between blocks), while autograd differentiates the clean shift; compiled, and "
     "with the right-hand side cloned, it is the clean shift"),
]
APPLIED_FIXES = []


def apply_eager_fixes(source, path):
    for old, new, why in EAGER_FIXES:
        count = source.count(old)
        if count != 1:
            raise SystemExit(f"reference-check: {path}: expected the statement `{old}` once, found it {count} times; "
                             f"the eager correction ({why}) needs looking at for this version")
        source = source.replace(old, new)
        APPLIED_FIXES.append({"statement": old, "replacement": new, "why": why})
        print(f"note: eager correction of the reference: `{old}` -> `{new}` ({why})", flush=True)
    return source


def load_reference(ref_dir, attention, compile_):
    """Executes the class-defining part of REF_DIR/train_gpt.py as module `reference_train_gpt`."""
    source_path = os.path.join(ref_dir, "train_gpt.py")
    with open(source_path) as f:
        source = f.read()
    marker = "\n# begin logging"
    cut = source.find(marker)
    if cut < 0:
        raise SystemExit(f"reference-check: {source_path}: no '# begin logging' line; cannot find the end of the "
                         "definitions")
    os.environ.update({"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
                       "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "DISABLE_FP8": "1"})
    if not compile_:
        os.environ["TORCH_COMPILE_DISABLE"] = "1"
    import torch
    if not compile_:
        torch._dynamo.config.disable = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    kernels = types.ModuleType("kernels")
    ATTENTION["mode"] = attention
    kernels.get_kernel = lambda *a, **k: types.SimpleNamespace(flash_attn_interface=attention_module(torch))
    sys.modules["kernels"] = kernels
    # tiktoken downloads the GPT-2 files unless they are cached; the device has no network, so it is only asked
    # when the cache holds them (the check loads our prefix table either way).
    cache = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR") or os.path.join(
        __import__("tempfile").gettempdir(), "data-gym-cache")
    cached = all(os.path.isfile(os.path.join(cache, name)) for name in (
        "6d1cbeee0f20b3d9449abfede4726ed8212e3aee", "6c7ea1a7e38e3a7f062df639a5b80947f075ffe6"))
    # Otherwise the GPT-2 ranks come from our r50k_base.tiktoken (the same mergeable ranks as tiktoken's "gpt2"),
    # so the reference's build_prefix_table can still be run against our table.
    fallback = types.SimpleNamespace(_mergeable_ranks=gpt2_ranks_from_file())
    try:
        import tiktoken
        original = tiktoken.get_encoding

        def get_encoding(name):
            if cached:
                try:
                    return original(name)
                except Exception as e:
                    print(f"note: tiktoken.get_encoding({name!r}) failed ({e})")
            return fallback
        tiktoken.get_encoding = get_encoding
    except ImportError:
        stub = types.ModuleType("tiktoken")
        stub.get_encoding = lambda name: fallback
        sys.modules["tiktoken"] = stub
    sys.path.insert(0, ref_dir)
    saved_argv0 = sys.argv[0]
    sys.argv[0] = source_path  # the reference reads its own file and its kernels' files for its log
    module = types.ModuleType("reference_train_gpt")
    module.__file__ = source_path
    sys.modules[module.__name__] = module
    try:
        exec(compile(apply_eager_fixes(source[:cut], source_path), source_path, "exec"), module.__dict__)
    finally:
        sys.argv[0] = saved_argv0
    return torch, module

def shorten_schedule(ref, scheduled, extension):
    """Rebuilds the reference's training schedule for `scheduled` + `extension` steps (its stage fractions,
    cooldown and split rule unchanged). Its functions read the module-level `training_schedule` at call time."""
    ref.args.num_scheduled_iterations = scheduled
    ref.args.num_extension_iterations = extension
    ref.training_schedule = ref.TrainingSchedule(ref.TRAINING_STAGES, scheduled, extension,
                                                 cooldown_frac=ref.training_schedule.cooldown_frac)
    return ref.training_schedule
