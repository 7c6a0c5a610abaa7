"""Pagoda's Neuron artifacts builder (tools/neuron_build/README.md).

``python3 -m tools.neuron_build`` builds a manifest, weights and one program per bucket;
``python3 -m tools.neuron_build.run`` runs cpu-reference artifacts in-process.
"""
