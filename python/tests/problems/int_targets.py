import torch
import torch.nn as nn


class Model(nn.Module):
    """Negative log-likelihood of class ids under log-softmax scores."""

    def __init__(self):
        super().__init__()

    def forward(self, scores, targets):
        return torch.nn.functional.cross_entropy(scores, targets)


batch_size = 1024
num_classes = 500
score_shape = (num_classes,)


def get_inputs():
    return [torch.rand(batch_size, *score_shape), torch.randint(0, num_classes, (batch_size,))]


def get_init_inputs():
    return []
