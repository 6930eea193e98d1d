#!/bin/bash
# $1 = version dir (old/new), $2 = requests
cd /work/main
PYTHONHASHSEED=0 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 PYTHONPATH=/tmp/tw_$1/src:/work/main/bench \
  valgrind --tool=callgrind --callgrind-out-file=/tmp/tw_cg/cg.$1.$2.out /root/.pyenv/versions/3.11.7/bin/python3 bench/cache_miss_instructions.py --child 0,,1000,$2 2>&1 | grep "Collected" | sed "s/^/$1 $2 /"
