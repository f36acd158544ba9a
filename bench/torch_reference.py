#!/usr/bin/python3
"""PyTorch reference trainer that mirrors nmt's model and training recipe.

Used only by benchmarks, to compare nmt's tokens/s and time-to-BLEU with plain
PyTorch on the same data, token ids, model sizes and hyperparameters.

Run (from the repository root, with nmt's trained tokenizers):
    bench/torch_reference.py --config configs/toy.yaml \
        --src-model checkpoints/toy/tokenizer/src.model \
        --tgt-model checkpoints/toy/tokenizer/tgt.model \
        --threads 2 --max-minutes 5 --eval-minutes 1 \
        --hyp-out /tmp/ref.hyp --metrics /tmp/ref.jsonl [--precision bf16] [--device cuda]
The last line printed is `RESULT tokens_per_s=... steps=... train_seconds=... final_loss=...`.

--device cuda (default cpu) puts the model, every batch and the greedy decoding on the
GPU: bf16 is then torch.autocast("cuda", bfloat16), Adam is the fused CUDA one where this
PyTorch has it, and the clock is read after torch.cuda.synchronize(), so each step's time
is its GPU work. torch.backends.cuda.matmul.allow_tf32 is left at PyTorch's default (off
since 1.12): float32 matrix multiplies are plain float32, not TF32. Attention is
nn.MultiheadAttention's, which calls scaled_dot_product_attention on PyTorch 2.x.
On the GPU, scaled_dot_product_attention's cuDNN backend is turned off unless --cudnn-sdpa
is given: it builds an execution plan for every new shape, and with nmt's batching every
batch has new lengths (a profile on an H100: ~200 ms of host time per step in it, against
~4 ms of GPU work); the flash and memory-efficient backends need no plan.
--profile-steps N prints torch.profiler's ops by self time over N steps after the warm-up.
--budget-after-warmup starts the --max-minutes budget after the steps left out of tokens/s,
so that torch.compile's compilation (in those steps) does not use up a short budget
(bench/bench_gpu.sh's compiled run).

Identical to nmt: config keys and defaults; token ids (nmt's SentencePiece
models, no specials on the source, decoder input <start> y, labels y <end>);
the data.max_len filter; the batching rule (shuffle, stable sort by (target,
source) length, cut when rows * (S_max + T_max) > train.batch_tokens, shuffle
batch order, one RNG per epoch seeded seed*1000003+epoch); pre-LayerNorm
blocks with final encoder/decoder norms; embeddings * sqrt(d) + sinusoidal
table; dropout on embeddings, sublayer outputs and inside the ReLU FF, none on
attention probabilities; tied output projection; label-smoothed CE averaged
over non-pad tokens; Adam with nmt's learning-rate schedule (train.lr_schedule, min_lr,
warmup_steps or warmup_share over the --max-steps / --max-minutes budget);
global gradient-norm clipping; greedy decoding to <end> or decode.max_len;
tokens/s counts non-pad source + target tokens (n+1 per pair).

Differs: the RNG streams (Python's random instead of mt19937_64, so batch
order, dropout masks and initial weights differ); nn.MultiheadAttention keeps
q/k/v as one fused in_proj (each third is re-initialised with its own
xavier_uniform, as nmt's separate projections are); the greedy decoder's cache
keeps each layer's normalised inputs and re-projects keys/values every step
(nmt caches the projected keys/values) -- evaluation is off the training clock; --max-minutes counts training time only (nmt's
train.max_minutes is wall time); the printed BLEU is approximate (score the
--hyp-out file with nmt's scorer for the real figure).
"""
import argparse, collections, json, math, os, random, re, sys, time

import sentencepiece as spm
import torch
import torch.nn as nn
import torch.nn.functional as F
import yaml

PAD, UNK, START, END = 0, 1, 2, 3
DEFAULTS = {  # nmt's defaults (src/config/config.h) for the keys used here
    "data": {"train_src": "data/toy/train.zh", "train_tgt": "data/toy/train.en",
             "valid_src": "data/toy/valid.zh", "valid_tgt": "data/toy/valid.en",
             "test_src": "data/toy/test.zh", "test_tgt": "data/toy/test.en", "max_len": 64},
    "model": {"d_model": 128, "heads": 4, "encoder_layers": 2, "decoder_layers": 2,
              "ff_dim": 512, "dropout": 0.1, "activation_dropout": -1, "tie_embeddings": True,
              "max_positions": 256},
    "train": {"seed": 1, "threads": 0, "batch_tokens": 2000, "batch_sentences": 0, "lr": 2e-3,
              "warmup_steps": 200, "lr_schedule": "inverse_sqrt", "min_lr": 0.0, "warmup_share": 0.0,
              "adam_beta1": 0.9, "adam_beta2": 0.98, "adam_eps": 1e-9,
              "weight_decay": 0.0, "label_smoothing": 0.1, "clip_norm": 1.0, "log_every": 50},
    "decode": {"max_len": 80, "batch_size": 64, "max_len_factor": "auto"},
}


def length_factor(setting, src, tgt):
    """decode.max_len_factor as nmt resolves it (src/runtime/length_limit.h): a number as given;
    auto: 1.5 x the ratio (t + 1 - 5) / s that 99.9% of the training pairs stay within (in steps
    of 1/100, rounded up), at least 2."""
    if setting != "auto":
        return float(setting)
    steps = sorted(min(100000, -(-max(0, len(t) + 1 - 5) * 100 // len(s))) for s, t in zip(src, tgt) if s and t)
    if not steps:
        return 3.0
    ratio = steps[len(steps) - int((1 - 0.999) * len(steps)) - 1] / 100
    return max(2.0, math.ceil(1.5 * ratio * 100) / 100)


def load_config(path, overrides):
    cfg = {sec: dict(keys) for sec, keys in DEFAULTS.items()}
    with open(path, encoding="utf-8") as f:
        for sec, keys in (yaml.safe_load(f) or {}).items():
            cfg.setdefault(sec, {}).update(keys or {})
    for item in overrides:
        key, sep, value = item.partition("=")
        sec, dot, name = key.partition(".")
        if not sep or not dot or name not in cfg.get(sec, {}):
            sys.exit(f"--set {item}: unknown key or not key.path=value")
        cfg[sec][name] = yaml.safe_load(value)
    return cfg


def learning_rate(tc, step, progress):
    """nmt's schedule (src/train/scheduler.cpp) at a 1-based step, `progress`
    (0..1) through the budget."""
    share = tc["warmup_share"]
    now, end = (progress, share) if share > 0 else (max(step, 1), tc["warmup_steps"])
    lr, low = tc["lr"], tc["min_lr"]
    if tc["lr_schedule"] == "inverse_sqrt":
        return lr * now / end if now < end else max(low, lr * math.sqrt(end / max(now, 1e-12)))
    warm = min(1.0, now / end)
    q = min(1.0, max(0.0, (progress - share) / (1.0 - share))) if share > 0 else progress
    shape = 0.5 * (1.0 + math.cos(math.pi * q)) if tc["lr_schedule"] == "cosine" else 1.0 - q
    return warm * (low + (lr - low) * shape)


def read_lines(path):
    with open(path, encoding="utf-8", newline="\n") as f:
        return [line.rstrip("\n").removesuffix("\r") for line in f]


def load_parallel(src_path, tgt_path, sp_src, sp_tgt, max_len):
    """nmt's load_parallel: drops pairs with src > max_len, tgt+1 > max_len or empty src."""
    src, tgt = [], []
    for s_text, t_text in zip(read_lines(src_path), read_lines(tgt_path), strict=True):
        s, t = sp_src.encode(s_text), sp_tgt.encode(t_text)
        if max_len > 0 and (len(s) > max_len or len(t) + 1 > max_len or not s):
            continue
        src.append(s), tgt.append(t)
    return src, tgt


def plan_batches(src, tgt, batch_tokens, batch_sentences, rng):
    """nmt's plan_batches: same algorithm, another RNG stream."""
    order = list(range(len(src)))
    rng.shuffle(order)
    order.sort(key=lambda i: (len(tgt[i]), len(src[i])))  # list.sort is stable
    batches, cur, s_max, t_max = [], [], 0, 0
    for i in order:
        s, t, rows = max(s_max, len(src[i])), max(t_max, len(tgt[i]) + 1), len(cur) + 1
        full = rows * (s + t) > batch_tokens if batch_tokens > 0 else rows > batch_sentences
        if full and cur:
            batches.append(cur)
            cur, s_max, t_max = [], 0, 0
        cur.append(i)
        s_max, t_max = max(s_max, len(src[i])), max(t_max, len(tgt[i]) + 1)
    if cur:
        batches.append(cur)
    rng.shuffle(batches)
    return batches


def pad(rows, width=None):
    width = max([1, *map(len, rows)]) if width is None else width
    return torch.tensor([r + [PAD] * (width - len(r)) for r in rows], dtype=torch.long)


def make_batch(src, tgt, idx):
    """-> src [B,S], decoder input <start> y [B,T], labels y <end> [B,T], token count."""
    ys = [tgt[i] for i in idx]
    tokens = sum(len(src[i]) for i in idx) + sum(len(y) + 1 for y in ys)
    return pad([src[i] for i in idx]), pad([[START] + y for y in ys]), pad([y + [END] for y in ys]), tokens


class Seq2Seq(nn.Module):
    def __init__(self, src_vocab, tgt_vocab, m):
        super().__init__()
        c = self.d_model = m["d_model"]
        self.tie = m["tie_embeddings"]
        self.src_embed = nn.Embedding(src_vocab, c, padding_idx=PAD)
        self.tgt_embed = nn.Embedding(tgt_vocab, c, padding_idx=PAD)
        self.out_proj = None if self.tie else nn.Linear(c, tgt_vocab)
        self.dropout = nn.Dropout(m["dropout"])
        # norm_first=True: x + dropout(f(LN(x))) blocks; nn.Transformer adds the
        # final encoder/decoder LayerNorms itself.
        self.transformer = nn.Transformer(c, m["heads"], m["encoder_layers"], m["decoder_layers"],
                                          m["ff_dim"], m["dropout"], activation="relu",
                                          batch_first=True, norm_first=True)
        # nn.Transformer xavier-initialises every matrix; nmt does so only for the
        # attention projections (zero biases) and keeps Linear's default init in the FF.
        for mod in self.transformer.modules():
            if isinstance(mod, nn.MultiheadAttention):
                mod.dropout = 0.0  # nmt has no dropout on attention probabilities
                for k in range(3):  # q, k, v each xavier_uniform over a [c, c] matrix
                    nn.init.xavier_uniform_(mod.in_proj_weight[k * c:(k + 1) * c])
            elif isinstance(mod, (nn.TransformerEncoderLayer, nn.TransformerDecoderLayer)):
                mod.linear1.reset_parameters(), mod.linear2.reset_parameters()
                if m.get("activation_dropout", -1) >= 0:  # the FF's dropout after its ReLU
                    mod.dropout.p = m["activation_dropout"]
        with torch.no_grad():  # unit variance after the sqrt(c) scaling; pad row zero
            for emb in (self.src_embed, self.tgt_embed):
                emb.weight.normal_(0.0, 1.0 / math.sqrt(c))
                emb.weight[PAD].zero_()
        t = torch.arange(m["max_positions"], dtype=torch.float).unsqueeze(1)
        angle = t * torch.exp(torch.arange(0, c, 2, dtype=torch.float) * (-math.log(10000.0) / c))
        pe = torch.zeros(m["max_positions"], c)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(angle), torch.cos(angle)[:, : c // 2]
        self.register_buffer("positions", pe)

    def embed(self, table, ids, offset=0):
        pos = self.positions[offset:offset + ids.size(1)]
        return self.dropout(table(ids) * math.sqrt(self.d_model) + pos)

    def logits(self, y):
        return y @ self.tgt_embed.weight.t() if self.tie else self.out_proj(y)

    def encode(self, src):
        return self.transformer.encoder(self.embed(self.src_embed, src), src_key_padding_mask=src.eq(PAD))

    def decode(self, tgt_in, memory, src_pad):
        t = tgt_in.size(1)
        causal = torch.triu(torch.ones(t, t, dtype=torch.bool, device=tgt_in.device), 1)
        y = self.transformer.decoder(self.embed(self.tgt_embed, tgt_in), memory, tgt_mask=causal,
                                     tgt_key_padding_mask=tgt_in.eq(PAD),
                                     memory_key_padding_mask=src_pad)
        return self.logits(y)

    def decode_step(self, tokens, t, memory, src_pad, cache):
        """Greedy-decoding step in eval mode: logits [B, V] after the tokens [B] at
        position t. Each layer caches its normalised inputs so far, all that its
        causal self-attention needs (the same numbers as decode() on the prefix)."""
        x = self.embed(self.tgt_embed, tokens.unsqueeze(1), offset=t)
        for i, layer in enumerate(self.transformer.decoder.layers):
            h = layer.norm1(x)
            cache[i] = h if t == 0 else torch.cat([cache[i], h], 1)
            x = x + layer.self_attn(h, cache[i], cache[i], need_weights=False)[0]
            x = x + layer.multihead_attn(layer.norm2(x), memory, memory, key_padding_mask=src_pad,
                                         need_weights=False)[0]
            x = x + layer.linear2(layer.activation(layer.linear1(layer.norm3(x))))
        return self.logits(self.transformer.decoder.norm(x))[:, 0]

    def forward(self, src, tgt_in):
        return self.decode(tgt_in, self.encode(src), src.eq(PAD))


@torch.no_grad()
def translate(model, sp_src, sp_tgt, lines, max_len, batch_size, max_positions, max_len_factor=0.0):
    """Batched greedy decoding, like nmt's translate_lines (sorted by length, cached; a sentence
    stops at <end>, max_len, or max_len_factor * its source tokens + 5). Runs on the model's device."""
    model.eval()
    dev = model.positions.device
    enc = [sp_src.encode(line)[:max_positions] for line in lines]
    order = sorted((i for i in range(len(enc)) if enc[i]), key=lambda i: len(enc[i]))
    hyps = [""] * len(lines)
    limit = min(max_len, max_positions - 1)
    for b in range(0, len(order), batch_size):
        idx = order[b:b + batch_size]
        src = pad([enc[i] for i in idx]).to(dev)
        memory, src_pad = model.encode(src), src.eq(PAD)
        lim = [max(1, min(limit, int(max_len_factor * len(enc[i]) + 5))) if max_len_factor > 0 else limit
               for i in idx]
        ys = torch.full((len(idx), 1), START, dtype=torch.long, device=dev)
        done, cache = torch.zeros(len(idx), dtype=torch.bool, device=dev), {}
        for t in range(max(lim)):
            nxt = model.decode_step(ys[:, -1], t, memory, src_pad, cache).argmax(-1)
            ys = torch.cat([ys, nxt.unsqueeze(1)], 1)
            done |= nxt.eq(END) | torch.tensor([t + 1 >= n for n in lim], device=dev)
            if done.all():
                break
        for row, i in enumerate(idx):
            out = ys[row, 1:lim[row] + 1].tolist()
            out = out[:out.index(END)] if END in out else out
            hyps[i] = sp_tgt.decode([x for x in out if x > END])
    model.train()
    return hyps


def tok13a(line):  # approximately sacreBLEU's 13a tokenizer
    line = re.sub(r"([\{-\~\[-\` -\&\(-\+\:-\@\/])", r" \1 ", f" {line} ")
    line = re.sub(r"([^0-9])([\.,])", r"\1 \2 ", line)
    line = re.sub(r"([\.,])([^0-9])", r" \1 \2", line)
    return re.sub(r"([0-9])(-)", r"\1 \2 ", line).split()


def approx_bleu(hyps, refs):
    """Corpus BLEU-4 with exp smoothing; approximate (nmt's scorer gives the real figure)."""
    try:
        import sacrebleu
        return sacrebleu.corpus_bleu(hyps, [refs]).score
    except ImportError:
        pass
    match, total, hyp_len, ref_len = [0] * 4, [0] * 4, 0, 0
    for h, r in zip(hyps, refs):
        h, r = tok13a(h), tok13a(r)
        hyp_len, ref_len = hyp_len + len(h), ref_len + len(r)
        for n in range(4):
            hc = collections.Counter(tuple(h[i:i + n + 1]) for i in range(len(h) - n))
            rc = collections.Counter(tuple(r[i:i + n + 1]) for i in range(len(r) - n))
            match[n] += sum(min(c, rc[g]) for g, c in hc.items())
            total[n] += max(0, len(h) - n)
    if hyp_len == 0:
        return 0.0
    log_p, smooth = 0.0, 1
    for m, t in zip(match, total):
        if t == 0:
            return 0.0
        if m == 0:
            smooth *= 2
        log_p += math.log((m if m else 1.0 / smooth) / t) / 4
    bp = 1.0 if hyp_len > ref_len else math.exp(1 - ref_len / hyp_len)
    return 100 * bp * math.exp(log_p)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", required=True)
    ap.add_argument("--set", action="append", default=[], metavar="KEY.PATH=VALUE")
    ap.add_argument("--src-model", required=True)
    ap.add_argument("--tgt-model", required=True)
    ap.add_argument("--threads", type=int, help="default: train.threads (0 = all cores)")
    ap.add_argument("--max-minutes", type=float, default=0, help="training time, evaluation excluded")
    ap.add_argument("--max-steps", type=int, default=0)
    ap.add_argument("--log-every", type=int, help="default: train.log_every")
    ap.add_argument("--eval-minutes", type=float, default=0, help="BLEU every E minutes of training")
    ap.add_argument("--eval-src", help="default: data.valid_src")
    ap.add_argument("--eval-ref", help="default: data.valid_tgt")
    ap.add_argument("--hyp-out", help="final greedy hypotheses of --final-src")
    ap.add_argument("--final-src", help="what --hyp-out translates (default: --eval-src), e.g. the test split")
    ap.add_argument("--hyp-dir", help="also write each evaluation's hypotheses here, as "
                                      "SECONDS.txt (training seconds), to score them with nmt score")
    ap.add_argument("--metrics", help="JSON lines of log and eval records")
    ap.add_argument("--test-minutes", default="",
                    help="comma-separated training minutes at which --final-src is also translated, into "
                         "--hyp-dir as test_SECONDS.txt (time-to-BLEU budgets)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                    help="where the model trains and decodes (cuda: the current GPU)")
    ap.add_argument("--precision", choices=["float32", "bf16"], default="float32",
                    help="bf16: torch.autocast(DEVICE, bfloat16) around forward and loss")
    ap.add_argument("--compile", action="store_true",
                    help="torch.compile the model (PyTorch 2.x: inductor, dynamic shapes since every batch "
                         "has its own lengths); compilation falls in the steps left out of tokens/s")
    ap.add_argument("--warmup-steps-excluded", type=int, default=3, help="steps left out of tokens/s")
    ap.add_argument("--cudnn-sdpa", action="store_true",
                    help="let scaled_dot_product_attention use its cuDNN backend on the GPU (off by default: "
                         "it builds an execution plan for every new shape, and every batch has its own lengths)")
    ap.add_argument("--profile-steps", type=int, default=0,
                    help="profile this many steps after the warm-up (torch.profiler, CPU and CUDA), print the "
                         "ops by self time and stop")
    ap.add_argument("--budget-after-warmup", action="store_true",
                    help="--max-minutes counts from the end of the steps left out of tokens/s, so that "
                         "compilation does not use up a short budget (train_seconds still counts every step)")
    a = ap.parse_args()
    if a.max_minutes <= 0 and a.max_steps <= 0:
        ap.error("give --max-minutes and/or --max-steps")
    cuda = a.device == "cuda"
    if cuda and not torch.cuda.is_available():
        sys.exit(f"--device cuda: PyTorch {torch.__version__} sees no CUDA device")
    if cuda and not a.cudnn_sdpa and hasattr(torch.backends.cuda, "enable_cudnn_sdp"):
        # Measured on an H100 with PyTorch 2.11, bf16, configs/real.yaml: with
        # the cuDNN backend each step spent ~200 ms of host time in
        # _cudnn_attention_forward/backward (a plan per new shape) against
        # ~4 ms of GPU work; its flash and memory-efficient backends need no plan.
        torch.backends.cuda.enable_cudnn_sdp(False)
    cfg = load_config(a.config, a.set)
    d, m, tc = cfg["data"], cfg["model"], cfg["train"]
    threads = a.threads if a.threads is not None else tc["threads"]
    torch.set_num_threads(threads if threads > 0 else os.cpu_count())
    torch.manual_seed(tc["seed"])
    log_every = a.log_every or tc["log_every"]

    sp_src, sp_tgt = spm.SentencePieceProcessor(model_file=a.src_model), spm.SentencePieceProcessor(model_file=a.tgt_model)
    src, tgt = load_parallel(d["train_src"], d["train_tgt"], sp_src, sp_tgt, d["max_len"])
    cfg["decode"]["max_len_factor"] = length_factor(cfg["decode"]["max_len_factor"], src, tgt)
    eval_src = read_lines(a.eval_src or d["valid_src"])
    eval_ref = read_lines(a.eval_ref or d["valid_tgt"])
    model = Seq2Seq(sp_src.get_piece_size(), sp_tgt.get_piece_size(), m)
    if cuda:
        model.cuda()
    model.train()
    adam = dict(lr=tc["lr"], betas=(tc["adam_beta1"], tc["adam_beta2"]), eps=tc["adam_eps"],
                weight_decay=tc["weight_decay"])
    try:  # PyTorch >= 2.4 has a fused CPU Adam (CUDA: >= 1.13): what a user tuning for speed picks
        opt, adam_kind = torch.optim.Adam(model.parameters(), fused=True, **adam), "fused"
    except (TypeError, RuntimeError):
        opt, adam_kind = torch.optim.Adam(model.parameters(), **adam), "foreach" if torch.__version__ >= "2" else "default"
    if a.compile and not hasattr(torch, "compile"):
        sys.exit(f"--compile needs PyTorch 2.x (this is {torch.__version__})")
    forward = torch.compile(model, dynamic=True) if a.compile else model
    print(f"data: {len(src)} training pairs, {len(eval_src)} eval lines; vocab "
          f"{sp_src.get_piece_size()} / {sp_tgt.get_piece_size()}; "
          f"{sum(p.numel() for p in model.parameters())} parameters; {torch.get_num_threads()} threads; "
          f"PyTorch {torch.__version__}, {a.precision}{', compiled' if a.compile else ''}, Adam {adam_kind}"
          + (f"; device cuda ({torch.cuda.get_device_name()})" if cuda else ""), flush=True)
    metrics = open(a.metrics, "w") if a.metrics else None

    def record(**fields):
        if metrics:
            metrics.write(json.dumps(fields) + "\n"), metrics.flush()

    def evaluate(train_s, step):
        t0 = time.perf_counter()
        hyps = translate(model, sp_src, sp_tgt, eval_src, cfg["decode"]["max_len"],
                         cfg["decode"]["batch_size"], m["max_positions"], cfg["decode"]["max_len_factor"])
        bleu = approx_bleu(hyps, eval_ref)
        print(f"eval: step {step} train_seconds {train_s:.1f} bleu {bleu:.2f} "
              f"(decoding {time.perf_counter() - t0:.1f} s, not counted)", flush=True)
        record(train_seconds=train_s, step=step, valid_bleu=bleu)
        if a.hyp_dir:
            os.makedirs(a.hyp_dir, exist_ok=True)
            with open(os.path.join(a.hyp_dir, f"{train_s:08.1f}.txt"), "w", encoding="utf-8") as f:
                f.write("".join(h + "\n" for h in hyps))
        return hyps

    test_at = sorted(float(x) * 60 for x in a.test_minutes.split(",") if x)

    def translate_test(train_s):
        final = read_lines(a.final_src) if a.final_src else eval_src
        hyps = translate(model, sp_src, sp_tgt, final, cfg["decode"]["max_len"],
                         cfg["decode"]["batch_size"], m["max_positions"], cfg["decode"]["max_len_factor"])
        os.makedirs(a.hyp_dir, exist_ok=True)
        with open(os.path.join(a.hyp_dir, f"test_{train_s:08.1f}.txt"), "w", encoding="utf-8") as f:
            f.write("".join(h + "\n" for h in hyps))
        print(f"test: translated at train_seconds {train_s:.1f}", flush=True)

    prof = None
    if a.profile_steps > 0:
        from torch.profiler import ProfilerActivity, profile
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        prof = profile(activities=activities)
        a.max_steps = a.warmup_steps_excluded + a.profile_steps
    step, epoch, train_s, next_eval = 0, 0, 0.0, a.eval_minutes * 60
    budget_s = 0.0  # the training seconds the --max-minutes budget counts (updated after each step)
    warm_s = 0.0 if a.warmup_steps_excluded <= 0 else None  # training seconds at the end of the warm-up
    counted_tokens, counted_s, win_tokens, win_s, win_loss, loss_v = 0, 0.0, 0, 0.0, [], float("nan")
    done = False
    while not done:
        plan = plan_batches(src, tgt, tc["batch_tokens"], tc["batch_sentences"],
                            random.Random(tc["seed"] * 1000003 + epoch))
        for idx in plan:
            t0 = time.perf_counter()
            b_src, b_in, b_out, tokens = make_batch(src, tgt, idx)
            if cuda:
                b_src, b_in, b_out = b_src.cuda(), b_in.cuda(), b_out.cuda()
            step += 1
            # Budget progress as nmt's: the larger of the step and the clock fractions.
            progress = max(step / a.max_steps if a.max_steps > 0 else 0.0,
                           budget_s / (a.max_minutes * 60) if a.max_minutes > 0 else 0.0)
            for g in opt.param_groups:
                g["lr"] = learning_rate(tc, step, min(1.0, progress))
            opt.zero_grad(set_to_none=True)
            with torch.autocast(a.device, dtype=torch.bfloat16, enabled=a.precision == "bf16"):
                logits = forward(b_src, b_in)
                loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), b_out.view(-1),
                                       ignore_index=PAD, label_smoothing=tc["label_smoothing"])
            loss.backward()
            if tc["clip_norm"] > 0:
                nn.utils.clip_grad_norm_(model.parameters(), tc["clip_norm"])
            opt.step()
            loss_v = loss.item()
            if not math.isfinite(loss_v):
                sys.exit(f"training diverged: loss {loss_v} at step {step}")
            if cuda:  # the optimizer step's kernels too, not only the loss's
                torch.cuda.synchronize()
            dt = time.perf_counter() - t0
            train_s += dt
            win_tokens, win_s = win_tokens + tokens, win_s + dt
            win_loss.append(loss_v)
            if step > a.warmup_steps_excluded:
                counted_tokens, counted_s = counted_tokens + tokens, counted_s + dt
            elif step == a.warmup_steps_excluded:
                warm_s = train_s
                if prof is not None:
                    prof.__enter__()
            if step % log_every == 0:
                print(f"step {step} epoch {epoch + 1} loss {sum(win_loss) / len(win_loss):.4f} "
                      f"{win_tokens / win_s:.0f} tok/s train_seconds {train_s:.1f}", flush=True)
                record(train_seconds=train_s, step=step, tokens_per_s=win_tokens / win_s,
                       train_loss=sum(win_loss) / len(win_loss))
                win_tokens, win_s, win_loss = 0, 0.0, []
            budget_s = train_s if not a.budget_after_warmup else 0.0 if warm_s is None else train_s - warm_s
            done = (a.max_steps > 0 and step >= a.max_steps) or \
                   (a.max_minutes > 0 and budget_s >= a.max_minutes * 60)
            if done:
                break
            if a.eval_minutes > 0 and train_s >= next_eval:
                evaluate(train_s, step)
                next_eval += a.eval_minutes * 60
            while test_at and train_s >= test_at[0] and a.hyp_dir:
                test_at.pop(0)
                translate_test(train_s)
        epoch += 1
    if a.eval_minutes > 0:
        evaluate(train_s, step)
    if a.hyp_out:
        final = read_lines(a.final_src) if a.final_src else eval_src
        hyps = translate(model, sp_src, sp_tgt, final, cfg["decode"]["max_len"],
                         cfg["decode"]["batch_size"], m["max_positions"], cfg["decode"]["max_len_factor"])
        with open(a.hyp_out, "w", encoding="utf-8") as f:
            f.writelines(h + "\n" for h in hyps)
    tok_s = counted_tokens / counted_s if counted_s > 0 else float("nan")
    if prof is not None:
        prof.__exit__(None, None, None)
        events = prof.key_averages()
        # Device time first (the key's name differs between PyTorch versions), then host time.
        keys = (["self_device_time_total", "self_cuda_time_total"] if cuda else []) + ["self_cpu_time_total"]
        shown_device = False
        for key in keys:
            if key != "self_cpu_time_total" and shown_device:
                continue
            try:
                table = events.table(sort_by=key, row_limit=18)
            except (AttributeError, KeyError, RuntimeError, ValueError):
                continue
            shown_device = shown_device or key != "self_cpu_time_total"
            print(f"profile of {a.profile_steps} steps after {a.warmup_steps_excluded} warm-up steps, by {key}; "
                  f"wall {counted_s / max(1, a.profile_steps) * 1e3:.1f} ms/step:\n{table}", flush=True)
        if not cuda:
            # One line for bench/bench_train_ceiling.sh: the profiled step's
            # wall time and the host time of its matrix multiplies and of its
            # attention (self time: ATen's CPU ops run on the calling thread).
            steps = max(1, a.profile_steps)
            gemm_ops = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::_addmm_activation"}
            gemm_us = sum(e.self_cpu_time_total for e in events if e.key in gemm_ops)
            attention_us = sum(e.self_cpu_time_total for e in events if "attention" in e.key.lower())
            print(f"PROFILE wall_ms={counted_s * 1e3 / steps:.2f} gemm_ms={gemm_us / 1e3 / steps:.2f} "
                  f"attention_ms={attention_us / 1e3 / steps:.2f}", flush=True)
    print(f"tokens/s leaves out the first {a.warmup_steps_excluded} steps (warm-up)")
    warm = f" warmup_seconds={train_s if warm_s is None else warm_s:.2f}" if a.budget_after_warmup else ""
    print(f"RESULT tokens_per_s={tok_s:.1f} steps={step} train_seconds={train_s:.2f} final_loss={loss_v:.4f}{warm}",
          flush=True)


if __name__ == "__main__":
    main()
