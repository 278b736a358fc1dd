"""What a job really ran with, read from inside it: the seed and the determinism flags it saw,
and the batch size, gradient accumulation, DataLoader workers and precision it resolved.

Why from inside: a config file says ``batch_size: auto``, ``num_workers: -1`` or nothing at
all; a launcher divides a global batch by the world size; a framework turns ``fp16: true`` into
a GradScaler or quietly runs fp32 on a CPU. Two sweep cells that agree in their configs can
still train differently, and that is only visible in the objects the job built. Parsing logs
or argv would guess; the objects do not.

How: ``HOOK`` is appended to the job's ``sitecustomize.py`` (``rgt.agent._pypath``), so it runs
at interpreter start in every Python of the job. It imports nothing heavy: torch, transformers,
Lightning and accelerate are read only from ``sys.modules``, never imported. In the job's main
process (not a DataLoader worker, not a rank other than 0) a daemon thread looks up the live
instances of those classes (``gc.get_referrers`` of each class; ``live`` in ``HOOK`` says why
never ``gc.get_objects``) a while after start, then at growing intervals, and once at exit:
the objects of a ``main()`` are gone by then, so the last scan that saw them is kept. Each
process's capture goes into the job's own ``runtime.json`` (``RGT_JOB_DIR``, beside
``status.json``; one entry per process, under a lock, replaced atomically): job metadata, not
an artifact, so it changes no manifest and no teardown gate. ``rgt.verify.runtime`` reads it.
A job whose Python never imports torch writes nothing. Any error is swallowed: the job's own
work must never fail for this. ``RGT_RUNTIME_CAPTURE=0`` turns it off.
"""

SCHEMA = "rgt.runtime/1"
FILENAME = "runtime.json"

# Python 3.8 syntax; no %-formatting (it is appended to a %-formatted template).
HOOK = r"""

def _rgt_runtime():
    import os

    if not os.environ.get("RGT_JOB_DIR") or os.environ.get("RGT_RUNTIME_CAPTURE") == "0":
        return
    import atexit
    import threading

    seen_at_start = {
        "PYTHONHASHSEED": os.environ.get("PYTHONHASHSEED"),
        "hash_randomization": bool(sys.flags.hash_randomization),
    }
    kept = {}

    def main_process():
        mp = sys.modules.get("multiprocessing")
        try:
            if mp is not None and mp.parent_process() is not None:
                return False  # a DataLoader worker or a pool process
        except Exception:
            pass
        return os.environ.get("RANK", "0") == "0" and os.environ.get("LOCAL_RANK", "0") == "0"

    def cls(module, name):
        return getattr(sys.modules.get(module), name, None)

    def live(bases):
        # The instances of these classes and their subclasses, as the objects that refer to
        # their class (an instance of a Python class refers to its type). Never
        # gc.get_objects() from this thread: holding every object while the job's thread is
        # between bytecodes catches a tuple it is still building, whose resize then fails.
        import gc

        classes, todo = [], list(bases)
        while todo:
            c = todo.pop()
            if not any(c is k for k in classes):
                classes.append(c)
                todo.extend(type.__subclasses__(c))
        wanted = set(map(id, classes))
        return [o for o in gc.get_referrers(*classes) if id(type(o)) in wanted]

    def scan():

        kinds = [
            ("loader", cls("torch.utils.data.dataloader", "DataLoader")),
            ("hf", cls("transformers.training_args", "TrainingArguments")),
            ("pl", cls("lightning.pytorch.trainer.trainer", "Trainer")),
            ("pl", cls("pytorch_lightning.trainer.trainer", "Trainer")),
            ("accelerate", cls("accelerate.accelerator", "Accelerator")),
            ("scaler", cls("torch.amp.grad_scaler", "GradScaler")),
            ("scaler", cls("torch.cuda.amp.grad_scaler", "GradScaler")),
            ("param", cls("torch.nn.parameter", "Parameter")),
        ]
        kinds = [(k, c) for k, c in kinds if isinstance(c, type)]
        found = {"loader": [], "hf": [], "pl": [], "accelerate": [], "scaler": [], "param": {}}
        for obj in live(tuple(c for _, c in kinds)):
            mro = type(obj).__mro__
            kind = next(k for k, c in kinds if c in mro)
            if kind == "param":
                dtype = str(getattr(obj, "dtype", "?")).replace("torch.", "")
                found["param"][dtype] = found["param"].get(dtype, 0) + int(obj.numel())
            elif len(found[kind]) < 16:
                found[kind].append(obj)
        return knobs(found)

    def loader_of(loaders):
        rows = []
        for dl in loaders:
            sampler = getattr(dl, "sampler", None)
            name = type(sampler).__name__
            shuffled = name == "RandomSampler" or bool(getattr(sampler, "shuffle", False))
            size = getattr(dl, "batch_size", None)
            if size is None:
                size = getattr(getattr(dl, "batch_sampler", None), "batch_size", None)
            rows.append({"batch_size": size, "num_workers": getattr(dl, "num_workers", None),
                         "shuffle": shuffled, "sampler": name})
        rows.sort(key=lambda r: not r["shuffle"])  # the training loader shuffles
        return rows

    def knobs(found):
        k = {}
        rows = loader_of(found["loader"])
        if rows:
            k.update(batch_size=rows[0]["batch_size"], num_workers=rows[0]["num_workers"])
            k["loaders"] = rows[:8]
        for args in found["hf"][:1]:
            k.update(batch_size=getattr(args, "per_device_train_batch_size", None),
                     grad_accum=getattr(args, "gradient_accumulation_steps", None),
                     num_workers=getattr(args, "dataloader_num_workers", None),
                     precision="bf16" if getattr(args, "bf16", False) else
                     "fp16" if getattr(args, "fp16", False) else "fp32", framework="transformers")
        for trainer in found["pl"][:1]:
            k.update(grad_accum=getattr(trainer, "accumulate_grad_batches", None),
                     precision=str(getattr(trainer, "precision", None)), framework="lightning")
        for acc in found["accelerate"][:1]:
            k.update(grad_accum=getattr(acc, "gradient_accumulation_steps", None),
                     precision=str(getattr(acc, "mixed_precision", None)), framework="accelerate")
        scalers = [s for s in found["scaler"] if getattr(s, "_enabled", True)]
        if found["param"]:
            k["param_dtypes"] = found["param"]
            main = max(found["param"], key=lambda d: found["param"][d])
            amp = "fp16-amp (GradScaler), params " if scalers else ""
            k.setdefault("precision", amp + main)
        if "world_size" not in k and os.environ.get("WORLD_SIZE"):
            k["world_size"] = os.environ.get("WORLD_SIZE")
        return k

    def flags(torch):
        cudnn = getattr(getattr(torch, "backends", None), "cudnn", None)
        f = dict(seen_at_start)
        f["CUBLAS_WORKSPACE_CONFIG"] = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
        f["RGT_SEED"] = os.environ.get("RGT_SEED")
        f["cudnn_deterministic"] = getattr(cudnn, "deterministic", None)
        f["cudnn_benchmark"] = getattr(cudnn, "benchmark", None)
        for key, name in (("deterministic_algorithms", "are_deterministic_algorithms_enabled"),
                          ("deterministic_warn_only",
                           "is_deterministic_algorithms_warn_only_enabled"),
                          ("torch_initial_seed", "initial_seed")):
            try:
                f[key] = getattr(torch, name)()
            except Exception:
                f[key] = None
        return f

    def capture(when):
        try:
            torch = sys.modules.get("torch")
            if torch is None or not main_process():
                return False
            new = {k: v for k, v in scan().items() if v is not None}
            if kept.get("framework") and not new.get("framework"):
                new = {k: v for k, v in new.items() if k not in kept}  # its objects are gone
            kept.update(new)
            write({"schema": "rgt.runtime/1", "when": when, "time": __import__("time").time(),
                   "pid": os.getpid(), "attempt": os.environ.get("RGT_ATTEMPT"),
                   "argv": list(sys.argv)[:20], "torch": getattr(torch, "__version__", None),
                   "determinism": flags(torch), "knobs": kept})
            return bool(new)
        except Exception:
            return False

    def write(doc):
        import fcntl
        import json

        path = os.path.join(os.environ["RGT_JOB_DIR"], "runtime.json")
        with open(path + ".lock", "a") as lock:  # the job's Pythons share one file
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                with open(path) as f:
                    procs = dict(json.load(f)["processes"])
            except Exception:
                procs = {}
            procs[str(os.environ.get("RGT_ATTEMPT", "0")) + "-" + str(os.getpid())] = doc
            for old in sorted(procs, key=lambda p: procs[p].get("time") or 0)[:-16]:
                del procs[old]
            tmp = path + "." + str(os.getpid()) + ".tmp"
            with open(tmp, "w") as f:
                json.dump({"schema": "rgt.runtime/1", "processes": procs}, f, default=str)
            os.replace(tmp, path)

    def patrol():
        import time

        delay = float(os.environ.get("RGT_RUNTIME_SCAN_S") or 60)
        # Every `delay` seconds until the training objects were seen, for the first minutes
        # at least (imports and data setup take a while); then at doubling intervals.
        patient_until = time.monotonic() + max(10 * delay, 120.0)
        seen = False
        while True:
            time.sleep(delay)
            if "torch" not in sys.modules:
                continue
            seen = capture("running") or seen
            if seen or time.monotonic() > patient_until:
                delay = min(delay * 2, 1800.0)

    atexit.register(capture, "exit")
    threading.Thread(target=patrol, name="rgt-runtime", daemon=True).start()


try:
    _rgt_runtime()
except Exception:
    pass
"""
