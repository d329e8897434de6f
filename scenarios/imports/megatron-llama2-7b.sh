#!/bin/bash
# Llama 2 7B with Megatron-LM on two nodes of eight GPUs (as Megatron-LM's examples launch it, with
# the values written in).
torchrun --nproc_per_node 8 --nnodes 2 --node_rank 0 --master_addr localhost --master_port 6000 \
    pretrain_gpt.py \
    --tensor-model-parallel-size 2 \
    --pipeline-model-parallel-size 2 \
    --sequence-parallel \
    --use-distributed-optimizer \
    --overlap-grad-reduce \
    --overlap-param-gather \
    --num-layers 32 \
    --hidden-size 4096 \
    --ffn-hidden-size 11008 \
    --num-attention-heads 32 \
    --seq-length 4096 \
    --max-position-embeddings 4096 \
    --swiglu \
    --normalization RMSNorm \
    --position-embedding-type rope \
    --untie-embeddings-and-output-weights \
    --disable-bias-linear \
    --tokenizer-type NullTokenizer \
    --vocab-size 32000 \
    --micro-batch-size 1 \
    --global-batch-size 128 \
    --train-iters 1000 \
    --lr 3.0e-4 --min-lr 3.0e-5 --lr-decay-style cosine --lr-warmup-iters 100 \
    --weight-decay 0.1 --clip-grad 1.0 --adam-beta1 0.9 --adam-beta2 0.95 \
    --bf16 \
    --recompute-granularity full --recompute-method uniform --recompute-num-layers 1 \
    --mock-data \
    --log-interval 10 --save-interval 1000 --eval-interval 1000 --eval-iters 10 \
    --empty-unused-memory-level 1
