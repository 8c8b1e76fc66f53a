/*
 * closed.h - the one result that says "this connection was closed (and maybe
 * freed): touch it no more", for the node's connection handlers (the client
 * socket, NBD, peer links). It is -ECONNRESET, never a bare -1 (-EPERM), so
 * it cannot be mistaken for, or leak out as, another errno. Callers test it
 * with == CONN_CLOSED or < 0.
 */
#ifndef RAMSTER_NODE_CLOSED_H
#define RAMSTER_NODE_CLOSED_H

#include <errno.h>

#define CONN_CLOSED (-ECONNRESET)

#endif /* RAMSTER_NODE_CLOSED_H */
