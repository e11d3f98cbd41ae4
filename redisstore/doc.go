// Package redisstore is a responder.Store on Redis: it lets a fleet of
// responders, in any number of processes and machines, handle each request
// once however often SQS delivers it.
//
// It lives in its own module, github.com/tempqueues/tempqueues/redisstore,
// so that only programs that use it depend on the Redis client
// (github.com/redis/go-redis/v9).
//
// # Keys and records
//
// Each request id has one key, Options.Prefix + id (default
// "tempqueues:idem:<id>"), holding one of:
//
//   - a lease: "L:<token>", where token is the responder's random owner
//     token, with a Redis expiry of the lease length (the responder passes
//     its visibility timeout). Begin takes it with SET NX PX; Renew, called
//     with each of the responder's visibility extensions while the handler
//     runs, compares the
//     token and PEXPIREs; Release compares the token and DELs. If the
//     responder dies, nothing renews the lease, and it ends at about the
//     time the request becomes visible again, so the next receiver takes
//     it over.
//   - an answer: "D" followed by a versioned JSON record of the reply (body
//     and message attributes of every data type; binary values in base64),
//     with a Redis expiry of the responder's StoreTTL. Complete writes it
//     in place of the lease in one step; Begin returns it as Done, and the
//     responder resends it instead of running the handler again. As the
//     responder.Store contract requires, Complete stores the answer even if
//     the caller's lease expired or passed to another responder (the
//     handler did run); that case is logged.
//
// Every operation is a single Lua script on a single key: one round trip,
// atomic, and usable on Redis Cluster. Compare-and-set on the owner token
// means a responder whose lease expired can neither renew nor release the
// lease of the responder that took over.
//
// Begin, Renew, Release and Complete take a context and return its error
// when it ends first. Renew returns an error matching responder.ErrLeaseLost
// when the caller no longer holds the lease; a value that cannot be read
// gives an error matching ErrBadRecord; Redis errors are wrapped.
package redisstore
