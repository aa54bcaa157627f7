"""Packets: chassis (OVS userspace datapath + ovn-controller), network namespaces as pods
(``netns``), the KubeVirt/ovs-cni side of VNF guests (``guests``), traffic streams, the data path
of a whole cluster (``network``) and the one world the packet tests, demo and bench share
(``world``)."""
