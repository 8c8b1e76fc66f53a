#!/bin/sh
# VM test of ec_layout = stripes over soft-RoCE: tests/vm/test-ec-rdma.sh with
# RAMSTER_EC_LAYOUT=stripes (see there): four ramsterd on rxe0, redundancy =
# ec 2+1; pages through n1 go out in stripes of two (each page whole on one
# peer, the stripe's parity on the third), every page is read back, n3 is
# killed and every page is read again (those whose slot was on n3 made again
# from the other two): byte-identical, none lost, no fragment left behind.
# The guest runs this from a copy: the test by its path in the tree (the cwd
# is the project root).
RAMSTER_EC_LAYOUT=stripes exec sh tests/vm/test-ec-rdma.sh
