"""The /train split of a vitkd dataset file as a PyTorch Dataset, for the
benchmarks that feed a model the way a PyTorch user would
(loader_torchvision.py, timm_step.py --data). Layout: src/data/dataset.hpp."""
import h5py
import torch


class H5Train(torch.utils.data.Dataset):
    """/train/images uint8 [H, W, C] -> (transform(uint8 tensor [C, H, W]), label);
    without a transform the uint8 tensor itself. The file is opened in each
    DataLoader worker; mean and std (per channel, pixel/255 units) from its
    attributes."""

    def __init__(self, path, transform=None):
        self.path, self.transform, self.file = path, transform, None
        with h5py.File(path, "r") as f:
            self.n = f["train/images"].shape[0]
            self.mean, self.std = list(f.attrs["mean"]), list(f.attrs["std"])

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.file is None:  # opened in the worker process
            self.file = h5py.File(self.path, "r")
        img = torch.from_numpy(self.file["train/images"][i]).permute(2, 0, 1)
        return (self.transform(img) if self.transform else img), int(self.file["train/labels"][i])
