"""The hwbackends conformance kit against the neuron backend."""

from __future__ import annotations

from hwbackends_neuron import NeuronBackend

from hwbackends.testing import BackendContract


class TestNeuronContract(BackendContract):
    backend_cls = NeuronBackend
    # The kit expects every Device to carry the class device type ("neuron"); hosts running
    # the XLA-based stack ("xla" devices, trn1 / inf2) are covered by test_neuron.py.
    hosts = ("hosts/trn2_48xlarge.json",)
    other_hosts = (
        "hosts/inf2_24xlarge_native.json",
        "hosts/trn1_no_package.json",
        "hosts/m7i_with_torch_neuronx.json",
        "hosts/trn2_torch_mismatch.json",
    )
    sdk_modules = ("torch_neuronx", "torch_xla", "torch")
