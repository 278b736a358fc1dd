"""RGT3xx data pipeline, RGT4xx resilience, RGT5xx throughput."""

from __future__ import annotations

from pathlib import Path

from tests.lint._lint import codes, found


def test_worker_init_fn_that_seeds_every_worker_alike(tmp_path: Path) -> None:
    source = """
    import numpy as np
    import torch
    from torch.utils.data import DataLoader

    def seed_worker(worker_id):
        np.random.seed(42)

    def good_worker(worker_id):
        seed = torch.initial_seed() % 2**32
        np.random.seed(seed)

    a = DataLoader(ds, num_workers=4, worker_init_fn=seed_worker)
    b = DataLoader(ds, num_workers=4, worker_init_fn=good_worker)
    """
    assert found(tmp_path, source) == [("RGT301", 6)]


def test_numpy_rng_in_getitem_is_not_flagged_torch_reseeds_it(tmp_path: Path) -> None:
    source = """
    import numpy as np
    from torch.utils.data import DataLoader, Dataset

    class Crops(Dataset):
        def __getitem__(self, i):
            return np.random.randint(0, 10)

    loader = DataLoader(Crops(), num_workers=8)
    """
    assert codes(tmp_path, source) == set()


def test_distributed_sampler_needs_set_epoch(tmp_path: Path) -> None:
    source = """
    from torch.utils.data import DataLoader
    from torch.utils.data.distributed import DistributedSampler

    sampler = DistributedSampler(train_set)
    val_sampler = DistributedSampler(val_set, shuffle=False)
    loader = DataLoader(train_set, sampler=sampler, num_workers=2)
    for epoch in range(90):
        for batch in loader:
            step(batch)
    """
    assert found(tmp_path, source) == [("RGT302", 4)]
    fixed = source.replace("    for batch", "    sampler.set_epoch(epoch)\n    for batch")
    assert codes(tmp_path, fixed) == set()


def test_iterable_dataset_without_worker_sharding(tmp_path: Path) -> None:
    source = """
    import torch
    from torch.utils.data import DataLoader, IterableDataset

    class Stream(IterableDataset):
        def __iter__(self):
            yield from open("data.txt")

    loader = DataLoader(Stream(), batch_size=8, num_workers=args.workers)
    """
    assert found(tmp_path, source) == [("RGT303", 4)]
    sharded = source.replace(
        '        yield from open("data.txt")',
        '        info = torch.utils.data.get_worker_info()\n        yield from open("data.txt")',
    )
    assert codes(tmp_path, sharded) == set()
    assert codes(tmp_path, source.replace("num_workers=args.workers", "num_workers=0")) == set()


def test_shuffled_validation_loader_is_advice(tmp_path: Path) -> None:
    source = """
    from torch.utils.data import DataLoader
    train_loader = DataLoader(train_set, shuffle=True, num_workers=2)
    val_loader = DataLoader(val_set, shuffle=True, num_workers=2)
    """
    assert found(tmp_path, source) == [("RGT304", 3)]


def test_checkpoint_overwritten_in_place_vs_atomic_vs_new_names(tmp_path: Path) -> None:
    source = """
    import os
    import torch

    def train(model, epochs, out):
        for epoch in range(epochs):
            fit_one_epoch(model)
            torch.save(model.state_dict(), os.path.join(out, "ckpt.pt"))
            torch.save(model.state_dict(), f"{out}/epoch_{epoch}.pt")

    def save_atomic(state, path):
        torch.save(state, path + ".tmp")
        os.replace(path + ".tmp", path)

    def resume(model, path):
        model.load_state_dict(torch.load(path))
    """
    assert found(tmp_path, source) == [("RGT401", 7)]


SAVER = """
import os
import torch

class CheckpointSaver:
    def _replace(self, src, dst):
        os.replace(src, dst)

    def _save(self, save_path, epoch):
        torch.save({"epoch": epoch, "model": self.model.state_dict()}, save_path)

    def save_checkpoints(self, epochs):
        for epoch in range(epochs):
            tmp_save_path = os.path.join(self.checkpoint_dir, "tmp.pth.tar")
            self._save(tmp_save_path, epoch)
            self._replace(tmp_save_path, os.path.join(self.checkpoint_dir, "last.pth.tar"))
"""


def test_a_save_helper_whose_callers_write_a_temporary_and_move_it(tmp_path: Path) -> None:
    # pytorch-image-models' timm/utils/checkpoint_saver.py, cut down
    assert codes(tmp_path, SAVER) == set()
    in_place = SAVER.replace("tmp_save_path", "last_path").replace(
        '            self._replace(last_path, os.path.join(self.checkpoint_dir, "last.pth.tar"))\n',
        "",
    )
    assert found(tmp_path, in_place) == [("RGT401", 9)]
    moved_but_not_temporary = SAVER.replace("tmp_save_path", "last_path")
    assert codes(tmp_path, moved_but_not_temporary) == set()


def test_a_save_helper_called_once_here_is_an_export(tmp_path: Path) -> None:
    # timm/models/_hub.py: save_for_hf writes the weights once, for push_to_hf_hub
    source = """
    import torch

    def save_for_hf(model, save_directory):
        torch.save(model.state_dict(), save_directory / "pytorch_model.bin")

    def push_to_hf_hub(model, repo):
        save_for_hf(model, repo)
    """
    assert codes(tmp_path, source) == set()
    # a save helper that nothing here calls, writing to its own fixed name: its loop is in
    # another module
    helper_only = source.split("def push_to_hf_hub")[0].replace("save_directory / ", "")
    assert {c for c, _ in found(tmp_path, helper_only)} == {"RGT401"}
    in_a_loop = source.replace(
        "        save_for_hf(model, repo)",
        "        for _ in range(3):\n            save_for_hf(model, repo)",
    )
    assert {c for c, _ in found(tmp_path, in_a_loop)} == {"RGT401"}


def test_a_save_helper_writing_where_its_unseen_caller_says(tmp_path: Path) -> None:
    # mlfoundations/open_clip's task/checkpoint.py: main.py passes epoch_{n}/ or a temporary
    # folder it renames after; this module never calls the helper
    source = """
    import os
    import torch

    def save_sharded_checkpoint(model, checkpoint_dir, epoch):
        torch.save({"epoch": epoch}, os.path.join(checkpoint_dir, "_metadata_extra.pt"))
    """
    assert codes(tmp_path, source) == set()
    # litgpt's LLM.save(self, out_dir=None): a None default, the caller gives the folder
    none_default = source.replace("checkpoint_dir, epoch)", "epoch, checkpoint_dir=None)")
    assert codes(tmp_path, none_default) == set()
    # pytorch/examples imagenet: the name is the helper's own default, overwritten each time
    default = source.replace("checkpoint_dir, epoch)", "epoch, checkpoint_dir='runs')")
    assert {c for c, _ in found(tmp_path, default)} == {"RGT401"}


def test_no_resume_path_only_for_a_training_loop(tmp_path: Path) -> None:
    source = """
    import torch
    for epoch in range(3):
        for x, y in loader:
            optimizer.zero_grad()
            model(x).sum().backward()
            optimizer.step()
    torch.save(model.state_dict(), "final.pt")
    """
    assert found(tmp_path, source) == [("RGT402", 7)]
    export_only = 'import torch\ntorch.save(features, "feats.pt")\n'
    assert codes(tmp_path, export_only) == set()


def test_collective_on_rank_zero_only(tmp_path: Path) -> None:
    source = """
    import torch.distributed as dist

    def finish(model, rank):
        if rank == 0:
            torch.save(model.state_dict(), "m.pt")
            dist.barrier()

    def log(metrics, args):
        if args.local_rank == 0:
            dist.all_reduce(metrics)
        else:
            dist.all_reduce(metrics)
    """
    assert found(tmp_path, source) == [("RGT403", 6)]


def test_download_first_barrier_idiom_is_paired(tmp_path: Path) -> None:
    source = """
    import torch

    def load(args):
        if args.local_rank not in [-1, 0]:
            torch.distributed.barrier()
        data = download()
        if args.local_rank == 0:
            torch.distributed.barrier()
        return data
    """
    assert codes(tmp_path, source) == set()


def test_spawn_start_method_without_main_guard(tmp_path: Path) -> None:
    source = """
    import torch.multiprocessing as mp
    from torch.utils.data import DataLoader
    mp.set_start_method("spawn")
    loader = DataLoader(ds, num_workers=4, pin_memory=True)
    for batch in loader:
        pass
    """
    assert found(tmp_path, source) == [("RGT404", 4)]
    guarded = (
        "import torch.multiprocessing as mp\nfrom torch.utils.data import DataLoader\n\n"
        "if __name__ == '__main__':\n    mp.set_start_method('spawn')\n"
        "    loader = DataLoader(ds, num_workers=4, pin_memory=True)\n"
    )
    assert codes(tmp_path, guarded) == set()


def test_throughput_hints_for_a_gpu_script(tmp_path: Path) -> None:
    source = """
    import torch
    from torch.utils.data import DataLoader
    device = torch.device("cuda")
    loader = DataLoader(train_set, batch_size=64, shuffle=True)
    for step, (x, y) in enumerate(loader):
        loss = model(x.to(device)).sum()
        loss.backward()
        print(loss.item())
        if step % 100 == 0:
            log(loss.item())
    """
    assert found(tmp_path, source) == [("RGT502", 4), ("RGT503", 4), ("RGT501", 8)]
    cpu_only = source.replace('torch.device("cuda")', 'torch.device("cpu")')
    assert codes(tmp_path, cpu_only) == set()
    tuned = source.replace("shuffle=True)", "shuffle=True, num_workers=8, pin_memory=True)")
    assert codes(tmp_path, tuned.replace("        print(loss.item())\n", "")) == set()
    # detectron2's CombinedDataLoader(loaders, images_per_worker, ratios): its own class
    combined = source.replace(
        "DataLoader(train_set, batch_size=64, shuffle=True)",
        "CombinedDataLoader(loaders, 4, ratios)",
    )
    assert found(tmp_path, combined.replace("import DataLoader", "import Sampler")) == [
        ("RGT501", 8)
    ]


def test_no_loader_hints_for_tensors_already_in_memory_or_on_the_gpu(tmp_path: Path) -> None:
    gpu_script = """
    import torch
    from torch.utils.data import DataLoader, Dataset, TensorDataset
    device = torch.device("cuda")
    LOADER
    """
    plain = gpu_script.replace("LOADER", "loader = DataLoader(train_set, batch_size=64)")
    assert codes(tmp_path, plain) == {"RGT502", "RGT503"}
    # dinov2's log_regression: features already computed, num_workers=0 on purpose
    features = "loader = DataLoader(TensorDataset(feats, labels), batch_size=64, num_workers=0)"
    assert codes(tmp_path, gpu_script.replace("LOADER", features)) == set()
    # x-transformers' train_enwik8.py: each sample goes to the GPU in __getitem__
    on_device = """class Sampler(Dataset):
        def __getitem__(self, index):
            return self.data[index : index + 128].long().to(device)

    loader = DataLoader(Sampler(), batch_size=4)"""
    assert codes(tmp_path, gpu_script.replace("LOADER", on_device)) == set()
    on_cpu = on_device.replace(".to(device)", "")
    assert codes(tmp_path, gpu_script.replace("LOADER", on_cpu)) == {"RGT502", "RGT503"}
    # pytorch_geometric's lightgcn.py: index batches into a graph already on the GPU
    indices = "loader = DataLoader(range(data.num_edges), batch_size=8192, shuffle=True)"
    assert codes(tmp_path, gpu_script.replace("LOADER", indices)) == set()
    # a library's DataLoader subclass is one (pytorch_geometric's DenseDataLoader)
    dense = "from torch_geometric.loader import DenseDataLoader\n    loader = DenseDataLoader(d, 2)"
    assert codes(tmp_path, gpu_script.replace("LOADER", dense)) == {"RGT502", "RGT503"}


def test_a_checkpoint_per_step_or_named_by_the_caller_is_not_overwritten(tmp_path: Path) -> None:
    # dinov2's train.py do_test: eval/<iteration>/teacher_checkpoint.pth, one folder per test
    per_step = """
    import os
    import torch

    def do_test(cfg, model, iteration):
        eval_dir = os.path.join(cfg.output_dir, "eval", str(iteration))
        path = os.path.join(eval_dir, "teacher_checkpoint.pth")
        torch.save({"teacher": model.state_dict()}, path)

    def do_train(cfg, model):
        for iteration in range(10):
            do_test(cfg, model, iteration)
    """
    assert codes(tmp_path, per_step) == set()
    fixed = per_step.replace('"eval", str(iteration))', '"eval")')
    assert {c for c, _ in found(tmp_path, fixed)} == {"RGT401"}
    # dinov2's FSDPCheckpointer.save(name): the file, opened under the caller's name
    named = """
    import os
    import torch

    class Checkpointer:
        def save(self, name, **kwargs):
            basename = f"{name}.{rank}.pth"
            save_file = os.path.join(self.save_dir, basename)
            with open(save_file, "wb") as f:
                torch.save(self.model.state_dict(), f)
    """
    assert codes(tmp_path, named) == set()
    assert {c for c, _ in found(tmp_path, named.replace("{name}", "last"))} == {"RGT401"}


def test_a_save_helper_whose_caller_names_a_new_file_each_time(tmp_path: Path) -> None:
    # facebookresearch/moco's main_moco.py: filename="checkpoint_{:04d}.pth.tar".format(epoch)
    source = """
    import torch

    def save_checkpoint(state, is_best, filename="checkpoint.pth.tar"):
        torch.save(state, filename)

    def main(model, epochs):
        for epoch in range(epochs):
            save_checkpoint({"epoch": epoch}, False, filename="ckpt_{:04d}.pth".format(epoch))
    """
    assert codes(tmp_path, source) == set()
    same_name = source.replace(', filename="ckpt_{:04d}.pth".format(epoch))', ")")
    assert found(tmp_path, same_name) == [("RGT401", 4)]  # moco's main_lincls.py
    # gpt-neox's tools/ckpts/merge20b.py: one output file per model-parallel rank
    by_rank = """
    import os
    import torch

    def modify_model_states(input_model_state_path, output_model_state_path):
        torch.save(torch.load(input_model_state_path), output_model_state_path)

    def merge(input_dir, output_dir):
        for i in range(8):
            modify_model_states(
                input_model_state_path=os.path.join(input_dir, f"mp_rank_{i:02d}.pt"),
                output_model_state_path=os.path.join(output_dir, f"mp_rank_{i:02d}.pt"),
            )
    """
    assert codes(tmp_path, by_rank) == set()
    one_file = by_rank.replace('f"mp_rank_{i:02d}.pt"),\n', '"merged.pt"),\n')
    assert {c for c, _ in found(tmp_path, one_file)} == {"RGT401"}
    # fairseq's emotion_conversion: formatted, but the same file every epoch
    same_file = by_rank.replace('f"mp_rank_{i:02d}.pt"),\n', 'f"{os.getcwd()}/{cfg.name}.pt"),\n')
    assert {c for c, _ in found(tmp_path, same_file)} == {"RGT401"}
