#!/usr/bin/env bash
# Regenerates the platforms of platforms/ that describe a node's host side (CPUs, DRAM, PCIe
# switches, NVMe drives), with trainsim platform. Host numbers are the vendors' published ones:
# - DGX-2 (the ZeRO-Offload / ZeRO-Infinity papers' machine): 16 V100-32GB on NVSwitch, PCIe
#   gen3, 2 Xeon Platinum 8168 (2 x 24 cores x 2.7 GHz x 32 fp32 FLOP/cycle = 4.1 TFLOP/s),
#   1.5 TB DDR4 (12 channels x 21.3 GB/s = 256 GB/s), 8 x 3.84 TB NVMe.
# - DGX A100: 2 EPYC 7742 (2 x 64 x 2.25 GHz x 16 = 4.6 TFLOP/s), 1 TB DDR4-3200 (16 channels
#   x 25.6 GB/s = 410 GB/s), PCIe gen4, 4 x 3.84 TB NVMe for data.
# - DGX H100: 2 Xeon Platinum 8480C (2 x 56 x 2.0 GHz x 32 = 7.2 TFLOP/s), 2 TB DDR5-4800
#   (16 channels x 38.4 GB/s = 614 GB/s), PCIe gen5, 8 x 3.84 TB NVMe.
# - A 4-GPU workstation: 4 RTX 4090 without NVLink, each on its own PCIe gen4 x16 root port of a
#   Threadripper PRO 5975WX (32 x 3.6 GHz x 32 = 3.7 TFLOP/s), 256 GB DDR4-3200 (8 channels =
#   205 GB/s), 2 NVMe drives.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/with-build.sh"
generate() { "$build/trainsim" platform "$@" > /dev/null; }
generate --gpu v100-32gb --gpus-per-node 16 --fabric nvswitch --pcie-gen 3 --nvme-per-node 8 \
  --host-memory 1.5TB --host-memory-bandwidth 256GBps --cpu-speed 4.1Tf -o platforms/dgx2-v100.xml
generate --gpu a100-80gb --pcie-gen 4 --nvme-per-node 4 \
  --host-memory 1TB --host-memory-bandwidth 410GBps --cpu-speed 4.6Tf -o platforms/dgx-a100-nvme.xml
generate --gpu h100-sxm --pcie-gen 5 --nvme-per-node 8 \
  --host-memory 2TB --host-memory-bandwidth 614GBps --cpu-speed 7.2Tf -o platforms/dgx-h100-nvme.xml
generate --gpu rtx4090 --gpus-per-node 4 --fabric pcie --pcie-gen 4 --gpus-per-pcie-switch 1 --nvme-per-node 2 \
  --host-memory 256GB --host-memory-bandwidth 205GBps --cpu-speed 3.7Tf -o platforms/workstation-4x-rtx4090.xml
echo "platforms updated"
