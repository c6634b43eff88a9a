//! The command table: one line per command, as Redis's commands.def.

use super::*;
use super::{
    command as cmd, config_cmd as cfg, connection as conn, expire as ex, hash as h, info as inf,
    keys as k, list as l, monitor as mon, pubsub as ps, server as srvc, set as se, slowlog as sl,
    sort as so, string as st, transaction as tx, zset as z,
};

pub type Handler = fn(&mut Ctx, &[&[u8]]);

/// Everything the dispatcher and COMMAND need to know about a command.
pub struct CommandSpec {
    /// Lower-case name.
    pub name: &'static str,
    /// Argument count including the name; negative means "at least".
    pub arity: i32,
    pub flags: u32,
    pub first_key: i32,
    pub last_key: i32,
    pub step: i32,
    pub handler: Handler,
    pub group: &'static str,
    pub since: &'static str,
    pub summary: &'static str,
    pub complexity: &'static str,
}

impl CommandSpec {
    /// ACL categories, as COMMAND INFO lists them.
    pub fn acl_categories(&self) -> Vec<&'static str> {
        let mut cats = Vec::new();
        if self.flags & WRITE != 0 {
            cats.push("@write");
        }
        if self.flags & READONLY != 0 {
            cats.push("@read");
        }
        match self.group {
            "string" => cats.push("@string"),
            "hash" => cats.push("@hash"),
            "list" => cats.push("@list"),
            "set" => cats.push("@set"),
            "sorted-set" => cats.push("@sortedset"),
            "generic" => cats.push("@keyspace"),
            "connection" => cats.push("@connection"),
            "transactions" => cats.push("@transaction"),
            "pubsub" => cats.push("@pubsub"),
            "server" => {}
            _ => {}
        }
        if self.flags & ADMIN != 0 {
            cats.push("@admin");
            cats.push("@dangerous");
        }
        if self.flags & FAST != 0 {
            cats.push("@fast");
        } else {
            cats.push("@slow");
        }
        cats
    }

    /// Positions of the key arguments in `argv` (COMMAND GETKEYS).
    pub fn key_positions(&self, argc: usize) -> Vec<usize> {
        if self.first_key <= 0 {
            return Vec::new();
        }
        let last = if self.last_key < 0 {
            argc as i32 + self.last_key
        } else {
            self.last_key
        };
        let mut out = Vec::new();
        let mut i = self.first_key;
        while i <= last && (i as usize) < argc {
            out.push(i as usize);
            i += self.step.max(1);
        }
        out
    }
}

macro_rules! cmd {
    ($name:literal, $arity:expr, $flags:expr, $first:expr, $last:expr, $step:expr, $h:expr, $group:literal, $since:literal, $summary:literal, $cx:literal) => {
        CommandSpec {
            name: $name,
            arity: $arity,
            flags: $flags,
            first_key: $first,
            last_key: $last,
            step: $step,
            handler: $h,
            group: $group,
            since: $since,
            summary: $summary,
            complexity: $cx,
        }
    };
}

const W: u32 = WRITE;
const R: u32 = READONLY;
const WD: u32 = WRITE | DENYOOM;
const WDF: u32 = WRITE | DENYOOM | FAST;
const WF: u32 = WRITE | FAST;
const RF: u32 = READONLY | FAST;
const CONN: u32 = NOSCRIPT | LOADING | STALE | FAST;

pub static COMMANDS: &[CommandSpec] = &[
    // strings
    cmd!("get", 2, RF, 1, 1, 1, st::get, "string", "1.0.0", "Returns the string value of a key.", "O(1)"),
    cmd!("set", -3, WD, 1, 1, 1, st::set, "string", "1.0.0", "Sets the string value of a key, ignoring its type. The key is created if it doesn't exist.", "O(1)"),
    cmd!("setnx", 3, WDF, 1, 1, 1, st::setnx, "string", "1.0.0", "Set the string value of a key only when the key doesn't exist.", "O(1)"),
    cmd!("setex", 4, WD, 1, 1, 1, st::setex, "string", "2.0.0", "Sets the string value and expiration time of a key. Creates the key if it doesn't exist.", "O(1)"),
    cmd!("psetex", 4, WD, 1, 1, 1, st::psetex, "string", "2.6.0", "Sets both string value and expiration time in milliseconds of a key. The key is created if it doesn't exist.", "O(1)"),
    cmd!("getset", 3, WDF, 1, 1, 1, st::getset, "string", "1.0.0", "Returns the previous string value of a key after setting it to a new value.", "O(1)"),
    cmd!("getdel", 2, WF, 1, 1, 1, st::getdel, "string", "6.2.0", "Returns the string value of a key after deleting the key.", "O(1)"),
    cmd!("getex", -2, WF, 1, 1, 1, st::getex, "string", "6.2.0", "Returns the string value of a key after setting its expiration time.", "O(1)"),
    cmd!("mget", -2, RF, 1, -1, 1, st::mget, "string", "1.0.0", "Atomically returns the string values of one or more keys.", "O(N) where N is the number of keys to retrieve."),
    cmd!("mset", -3, WD, 1, -1, 2, st::mset, "string", "1.0.1", "Atomically creates or modifies the string values of one or more keys.", "O(N) where N is the number of keys to set."),
    cmd!("msetnx", -3, WD, 1, -1, 2, st::msetnx, "string", "1.0.1", "Atomically modifies the string values of one or more keys only when all keys don't exist.", "O(N) where N is the number of keys to set."),
    cmd!("append", 3, WDF, 1, 1, 1, st::append, "string", "2.0.0", "Appends a string to the value of a key. Creates the key if it doesn't exist.", "O(1)"),
    cmd!("strlen", 2, RF, 1, 1, 1, st::strlen, "string", "2.2.0", "Returns the length of a string value.", "O(1)"),
    cmd!("getrange", 4, R, 1, 1, 1, st::getrange, "string", "2.4.0", "Returns a substring of the string stored at a key.", "O(N) where N is the length of the returned string."),
    cmd!("substr", 4, R, 1, 1, 1, st::getrange, "string", "1.0.0", "Returns a substring from a string value.", "O(N) where N is the length of the returned string."),
    cmd!("setrange", 4, WD, 1, 1, 1, st::setrange, "string", "2.2.0", "Overwrites a part of a string value with another by an offset. Creates the key if it doesn't exist.", "O(1), not counting the time taken to copy the new string in place."),
    cmd!("incr", 2, WDF, 1, 1, 1, st::incr, "string", "1.0.0", "Increments the integer value of a key by one. Uses 0 as initial value if the key doesn't exist.", "O(1)"),
    cmd!("decr", 2, WDF, 1, 1, 1, st::decr, "string", "1.0.0", "Decrements the integer value of a key by one. Uses 0 as initial value if the key doesn't exist.", "O(1)"),
    cmd!("incrby", 3, WDF, 1, 1, 1, st::incrby, "string", "1.0.0", "Increments the integer value of a key by a number. Uses 0 as initial value if the key doesn't exist.", "O(1)"),
    cmd!("decrby", 3, WDF, 1, 1, 1, st::decrby, "string", "1.0.0", "Decrements a number from the integer value of a key. Uses 0 as initial value if the key doesn't exist.", "O(1)"),
    cmd!("incrbyfloat", 3, WDF, 1, 1, 1, st::incrbyfloat, "string", "2.6.0", "Increment the floating point value of a key by a number. Uses 0 as initial value if the key doesn't exist.", "O(1)"),
    // hashes
    cmd!("hset", -4, WDF, 1, 1, 1, h::hset, "hash", "2.0.0", "Creates or modifies the value of a field in a hash.", "O(1) for each field/value pair added"),
    cmd!("hmset", -4, WDF, 1, 1, 1, h::hmset, "hash", "2.0.0", "Sets the values of multiple fields.", "O(N) where N is the number of fields being set."),
    cmd!("hsetnx", 4, WDF, 1, 1, 1, h::hsetnx, "hash", "2.0.0", "Sets the value of a field in a hash only when the field doesn't exist.", "O(1)"),
    cmd!("hget", 3, RF, 1, 1, 1, h::hget, "hash", "2.0.0", "Returns the value of a field in a hash.", "O(1)"),
    cmd!("hmget", -3, RF, 1, 1, 1, h::hmget, "hash", "2.0.0", "Returns the values of all fields in a hash.", "O(N) where N is the number of fields being requested."),
    cmd!("hgetall", 2, R, 1, 1, 1, h::hgetall, "hash", "2.0.0", "Returns all fields and values in a hash.", "O(N) where N is the size of the hash."),
    cmd!("hdel", -3, WF, 1, 1, 1, h::hdel, "hash", "2.0.0", "Deletes one or more fields and their values from a hash. Deletes the hash if no fields remain.", "O(N) where N is the number of fields to be removed."),
    cmd!("hlen", 2, RF, 1, 1, 1, h::hlen, "hash", "2.0.0", "Returns the number of fields in a hash.", "O(1)"),
    cmd!("hexists", 3, RF, 1, 1, 1, h::hexists, "hash", "2.0.0", "Determines whether a field exists in a hash.", "O(1)"),
    cmd!("hstrlen", 3, RF, 1, 1, 1, h::hstrlen, "hash", "3.2.0", "Returns the length of the value of a field.", "O(1)"),
    cmd!("hincrby", 4, WDF, 1, 1, 1, h::hincrby, "hash", "2.0.0", "Increments the integer value of a field in a hash by a number. Uses 0 as initial value if the field doesn't exist.", "O(1)"),
    cmd!("hincrbyfloat", 4, WDF, 1, 1, 1, h::hincrbyfloat, "hash", "2.6.0", "Increments the floating point value of a field by a number. Uses 0 as initial value if the field doesn't exist.", "O(1)"),
    cmd!("hkeys", 2, R, 1, 1, 1, h::hkeys, "hash", "2.0.0", "Returns all fields in a hash.", "O(N) where N is the size of the hash."),
    cmd!("hvals", 2, R, 1, 1, 1, h::hvals, "hash", "2.0.0", "Returns all values in a hash.", "O(N) where N is the size of the hash."),
    cmd!("hrandfield", -2, R | RANDOM, 1, 1, 1, h::hrandfield, "hash", "6.2.0", "Returns one or more random fields from a hash.", "O(N) where N is the number of fields returned"),
    cmd!("hscan", -3, R | RANDOM, 1, 1, 1, h::hscan, "hash", "2.8.0", "Iterates over fields and values of a hash.", "O(1) for every call. O(N) for a complete iteration."),
    // lists
    cmd!("lpush", -3, WDF, 1, 1, 1, l::lpush, "list", "1.0.0", "Prepends one or more elements to a list. Creates the key if it doesn't exist.", "O(1) for each element added"),
    cmd!("rpush", -3, WDF, 1, 1, 1, l::rpush, "list", "1.0.0", "Appends one or more elements to a list. Creates the key if it doesn't exist.", "O(1) for each element added"),
    cmd!("lpushx", -3, WDF, 1, 1, 1, l::lpushx, "list", "2.2.0", "Prepends one or more elements to a list only when the list exists.", "O(1) for each element added"),
    cmd!("rpushx", -3, WDF, 1, 1, 1, l::rpushx, "list", "2.2.0", "Appends an element to a list only when the list exists.", "O(1) for each element added"),
    cmd!("lpop", -2, WF, 1, 1, 1, l::lpop, "list", "1.0.0", "Returns the first elements in a list after removing it. Deletes the list if the last element was popped.", "O(N) where N is the number of elements returned"),
    cmd!("rpop", -2, WF, 1, 1, 1, l::rpop, "list", "1.0.0", "Returns and removes the last elements of a list. Deletes the list if the last element was popped.", "O(N) where N is the number of elements returned"),
    cmd!("llen", 2, RF, 1, 1, 1, l::llen, "list", "1.0.0", "Returns the length of a list.", "O(1)"),
    cmd!("lrange", 4, R, 1, 1, 1, l::lrange, "list", "1.0.0", "Returns a range of elements from a list.", "O(S+N)"),
    cmd!("lindex", 3, R, 1, 1, 1, l::lindex, "list", "1.0.0", "Returns an element from a list by its index.", "O(N)"),
    cmd!("lset", 4, WD, 1, 1, 1, l::lset, "list", "1.0.0", "Sets the value of an element in a list by its index.", "O(N)"),
    cmd!("linsert", 5, WD, 1, 1, 1, l::linsert, "list", "2.2.0", "Inserts an element before or after another element in a list.", "O(N)"),
    cmd!("lrem", 4, W, 1, 1, 1, l::lrem, "list", "1.0.0", "Removes elements from a list. Deletes the list if the last element was removed.", "O(N+M)"),
    cmd!("ltrim", 4, W, 1, 1, 1, l::ltrim, "list", "1.0.0", "Removes elements from both ends a list. Deletes the list if all elements were trimmed.", "O(N)"),
    cmd!("lpos", -3, R, 1, 1, 1, l::lpos, "list", "6.0.6", "Returns the index of matching elements in a list.", "O(N)"),
    cmd!("lmove", 5, WD, 1, 2, 1, l::lmove, "list", "6.2.0", "Returns an element after popping it from one list and pushing it to another. Deletes the list if the last element was moved.", "O(1)"),
    cmd!("rpoplpush", 3, WD, 1, 2, 1, l::rpoplpush, "list", "1.2.0", "Returns the last element of a list after removing and pushing it to another list. Deletes the list if the last element was popped.", "O(1)"),
    cmd!("lmpop", -4, W, 0, 0, 0, l::lmpop, "list", "7.0.0", "Returns multiple elements from a list after removing them. Deletes the list if the last element was popped.", "O(N+M)"),
    cmd!("blpop", -3, W | BLOCKING, 1, -2, 1, l::blpop, "list", "2.0.0", "Removes and returns the first element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped.", "O(N) where N is the number of provided keys."),
    cmd!("brpop", -3, W | BLOCKING, 1, -2, 1, l::brpop, "list", "2.0.0", "Removes and returns the last element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped.", "O(N) where N is the number of provided keys."),
    cmd!("blmove", 6, WD | BLOCKING, 1, 2, 1, l::blmove, "list", "6.2.0", "Pops an element from a list, pushes it to another list and returns it. Blocks until an element is available otherwise. Deletes the list if the last element was moved.", "O(1)"),
    cmd!("brpoplpush", 4, WD | BLOCKING, 1, 2, 1, l::brpoplpush, "list", "2.2.0", "Pops an element from a list, pushes it to another list and returns it. Block until an element is available otherwise. Deletes the list if the last element was popped.", "O(1)"),
    cmd!("blmpop", -5, W | BLOCKING, 0, 0, 0, l::blmpop, "list", "7.0.0", "Pops the first element from one of multiple lists. Blocks until an element is available otherwise. Deletes the list if the last element was popped.", "O(N+M) where N is the number of provided keys and M is the number of elements returned."),
    // sets
    cmd!("sadd", -3, WDF, 1, 1, 1, se::sadd, "set", "1.0.0", "Adds one or more members to a set. Creates the key if it doesn't exist.", "O(1) for each element added"),
    cmd!("srem", -3, WF, 1, 1, 1, se::srem, "set", "1.0.0", "Removes one or more members from a set. Deletes the set if the last member was removed.", "O(N)"),
    cmd!("sismember", 3, RF, 1, 1, 1, se::sismember, "set", "1.0.0", "Determines whether a member belongs to a set.", "O(1)"),
    cmd!("smismember", -3, RF, 1, 1, 1, se::smismember, "set", "6.2.0", "Determines whether multiple members belong to a set.", "O(N)"),
    cmd!("smembers", 2, R, 1, 1, 1, se::smembers, "set", "1.0.0", "Returns all members of a set.", "O(N)"),
    cmd!("scard", 2, RF, 1, 1, 1, se::scard, "set", "1.0.0", "Returns the number of members in a set.", "O(1)"),
    cmd!("spop", -2, WF | RANDOM, 1, 1, 1, se::spop, "set", "1.0.0", "Returns one or more random members from a set after removing them. Deletes the set if the last member was popped.", "O(N)"),
    cmd!("srandmember", -2, R | RANDOM, 1, 1, 1, se::srandmember, "set", "1.0.0", "Get one or multiple random members from a set", "O(N)"),
    cmd!("smove", 4, WF, 1, 2, 1, se::smove, "set", "1.0.0", "Moves a member from one set to another.", "O(1)"),
    cmd!("sinter", -2, R, 1, -1, 1, se::sinter, "set", "1.0.0", "Returns the intersect of multiple sets.", "O(N*M)"),
    cmd!("sintercard", -3, R, 0, 0, 0, se::sintercard, "set", "7.0.0", "Returns the number of members of the intersect of multiple sets.", "O(N*M)"),
    cmd!("sinterstore", -3, WD, 1, -1, 1, se::sinterstore, "set", "1.0.0", "Stores the intersect of multiple sets in a key.", "O(N*M)"),
    cmd!("sunion", -2, R, 1, -1, 1, se::sunion, "set", "1.0.0", "Returns the union of multiple sets.", "O(N)"),
    cmd!("sunionstore", -3, WD, 1, -1, 1, se::sunionstore, "set", "1.0.0", "Stores the union of multiple sets in a key.", "O(N)"),
    cmd!("sdiff", -2, R, 1, -1, 1, se::sdiff, "set", "1.0.0", "Returns the difference of multiple sets.", "O(N)"),
    cmd!("sdiffstore", -3, WD, 1, -1, 1, se::sdiffstore, "set", "1.0.0", "Stores the difference of multiple sets in a key.", "O(N)"),
    cmd!("sscan", -3, R | RANDOM, 1, 1, 1, se::sscan, "set", "2.8.0", "Iterates over members of a set.", "O(1) for every call. O(N) for a complete iteration."),
    // sorted sets
    cmd!("zadd", -4, WDF, 1, 1, 1, z::zadd, "sorted-set", "1.2.0", "Adds one or more members to a sorted set, or updates their scores. Creates the key if it doesn't exist.", "O(log(N)) for each item added"),
    cmd!("zincrby", 4, WDF, 1, 1, 1, z::zincrby, "sorted-set", "1.2.0", "Increments the score of a member in a sorted set.", "O(log(N))"),
    cmd!("zscore", 3, RF, 1, 1, 1, z::zscore, "sorted-set", "1.2.0", "Returns the score of a member in a sorted set.", "O(1)"),
    cmd!("zmscore", -3, RF, 1, 1, 1, z::zmscore, "sorted-set", "6.2.0", "Returns the score of one or more members in a sorted set.", "O(N)"),
    cmd!("zcard", 2, RF, 1, 1, 1, z::zcard, "sorted-set", "1.2.0", "Returns the number of members in a sorted set.", "O(1)"),
    cmd!("zcount", 4, RF, 1, 1, 1, z::zcount, "sorted-set", "2.0.0", "Returns the count of members in a sorted set that have scores within a range.", "O(log(N))"),
    cmd!("zlexcount", 4, RF, 1, 1, 1, z::zlexcount, "sorted-set", "2.8.9", "Returns the number of members in a sorted set within a lexicographical range.", "O(log(N))"),
    cmd!("zrange", -4, R, 1, 1, 1, z::zrange, "sorted-set", "1.2.0", "Returns members in a sorted set within a range of indexes.", "O(log(N)+M)"),
    cmd!("zrangestore", -5, WD, 1, 2, 1, z::zrangestore, "sorted-set", "6.2.0", "Stores a range of members from sorted set in a key.", "O(log(N)+M)"),
    cmd!("zrevrange", -4, R, 1, 1, 1, z::zrevrange, "sorted-set", "1.2.0", "Returns members in a sorted set within a range of indexes in reverse order.", "O(log(N)+M)"),
    cmd!("zrangebyscore", -4, R, 1, 1, 1, z::zrangebyscore, "sorted-set", "1.0.5", "Returns members in a sorted set within a range of scores.", "O(log(N)+M)"),
    cmd!("zrevrangebyscore", -4, R, 1, 1, 1, z::zrevrangebyscore, "sorted-set", "2.2.0", "Returns members in a sorted set within a range of scores in reverse order.", "O(log(N)+M)"),
    cmd!("zrangebylex", -4, R, 1, 1, 1, z::zrangebylex, "sorted-set", "2.8.9", "Returns members in a sorted set within a lexicographical range.", "O(log(N)+M)"),
    cmd!("zrevrangebylex", -4, R, 1, 1, 1, z::zrevrangebylex, "sorted-set", "2.8.9", "Returns members in a sorted set within a lexicographical range in reverse order.", "O(log(N)+M)"),
    cmd!("zrank", 3, RF, 1, 1, 1, z::zrank, "sorted-set", "2.0.0", "Returns the index of a member in a sorted set ordered by ascending scores.", "O(log(N))"),
    cmd!("zrevrank", 3, RF, 1, 1, 1, z::zrevrank, "sorted-set", "2.0.0", "Returns the index of a member in a sorted set ordered by descending scores.", "O(log(N))"),
    cmd!("zrem", -3, WF, 1, 1, 1, z::zrem, "sorted-set", "1.2.0", "Removes one or more members from a sorted set. Deletes the sorted set if all members were removed.", "O(M*log(N))"),
    cmd!("zremrangebyrank", 4, W, 1, 1, 1, z::zremrangebyrank, "sorted-set", "2.0.0", "Removes members in a sorted set within a range of indexes. Deletes the sorted set if all members were removed.", "O(log(N)+M)"),
    cmd!("zremrangebyscore", 4, W, 1, 1, 1, z::zremrangebyscore, "sorted-set", "1.2.0", "Removes members in a sorted set within a range of scores. Deletes the sorted set if all members were removed.", "O(log(N)+M)"),
    cmd!("zremrangebylex", 4, W, 1, 1, 1, z::zremrangebylex, "sorted-set", "2.8.9", "Removes members in a sorted set within a lexicographical range. Deletes the sorted set if all members were removed.", "O(log(N)+M)"),
    cmd!("zpopmin", -2, WF, 1, 1, 1, z::zpopmin, "sorted-set", "5.0.0", "Returns the lowest-scoring members from a sorted set after removing them. Deletes the sorted set if the last member was popped.", "O(log(N)*M)"),
    cmd!("zpopmax", -2, WF, 1, 1, 1, z::zpopmax, "sorted-set", "5.0.0", "Returns the highest-scoring members from a sorted set after removing them. Deletes the sorted set if the last member was popped.", "O(log(N)*M)"),
    cmd!("zmpop", -4, W, 0, 0, 0, z::zmpop, "sorted-set", "7.0.0", "Returns the highest- or lowest-scoring members from one or more sorted sets after removing them. Deletes the sorted set if the last member was popped.", "O(K) + O(M*log(N))"),
    cmd!("bzpopmin", -3, WF | BLOCKING, 1, -2, 1, z::bzpopmin, "sorted-set", "5.0.0", "Removes and returns the member with the lowest score from one or more sorted sets. Blocks until a member is available otherwise. Deletes the sorted set if the last element was popped.", "O(log(N))"),
    cmd!("bzpopmax", -3, WF | BLOCKING, 1, -2, 1, z::bzpopmax, "sorted-set", "5.0.0", "Removes and returns the member with the highest score from one or more sorted sets. Blocks until a member available otherwise. Deletes the sorted set if the last element was popped.", "O(log(N))"),
    cmd!("bzmpop", -5, W | BLOCKING, 0, 0, 0, z::bzmpop, "sorted-set", "7.0.0", "Removes and returns a member by score from one or more sorted sets. Blocks until a member is available otherwise. Deletes the sorted set if the last element was popped.", "O(K) + O(M*log(N))"),
    cmd!("zunion", -3, R, 0, 0, 0, z::zunion, "sorted-set", "6.2.0", "Returns the union of multiple sorted sets.", "O(N)+O(M*log(M))"),
    cmd!("zinter", -3, R, 0, 0, 0, z::zinter, "sorted-set", "6.2.0", "Returns the intersect of multiple sorted sets.", "O(N*K)+O(M*log(M))"),
    cmd!("zdiff", -3, R, 0, 0, 0, z::zdiff, "sorted-set", "6.2.0", "Returns the difference between multiple sorted sets.", "O(L + (N-K)log(N))"),
    cmd!("zunionstore", -4, WD, 1, 1, 1, z::zunionstore, "sorted-set", "2.0.0", "Stores the union of multiple sorted sets in a key.", "O(N)+O(M log(M))"),
    cmd!("zinterstore", -4, WD, 1, 1, 1, z::zinterstore, "sorted-set", "2.0.0", "Stores the intersect of multiple sorted sets in a key.", "O(N*K)+O(M*log(M))"),
    cmd!("zdiffstore", -4, WD, 1, 1, 1, z::zdiffstore, "sorted-set", "6.2.0", "Stores the difference of multiple sorted sets in a key.", "O(L + (N-K)log(N))"),
    cmd!("zintercard", -3, R, 0, 0, 0, z::zintercard, "sorted-set", "7.0.0", "Returns the number of members of the intersect of multiple sorted sets.", "O(N*K)"),
    cmd!("zrandmember", -2, R | RANDOM, 1, 1, 1, z::zrandmember, "sorted-set", "6.2.0", "Returns one or more random members from a sorted set.", "O(N)"),
    cmd!("zscan", -3, R | RANDOM, 1, 1, 1, z::zscan, "sorted-set", "2.8.0", "Iterates over members and scores of a sorted set.", "O(1) for every call. O(N) for a complete iteration."),
    cmd!("sort", -2, WD, 1, 1, 1, so::sort, "generic", "1.0.0", "Sorts the elements in a list, a set, or a sorted set, optionally storing the result.", "O(N+M*log(M))"),
    cmd!("sort_ro", -2, R, 1, 1, 1, so::sort_ro, "generic", "7.0.0", "Returns the sorted elements of a list, a set, or a sorted set.", "O(N+M*log(M))"),
    // keys
    cmd!("del", -2, W, 1, -1, 1, k::del, "generic", "1.0.0", "Deletes one or more keys.", "O(N) where N is the number of keys that will be removed."),
    cmd!("unlink", -2, WF, 1, -1, 1, k::unlink, "generic", "4.0.0", "Asynchronously deletes one or more keys.", "O(1) for each key removed regardless of its size."),
    cmd!("exists", -2, RF, 1, -1, 1, k::exists, "generic", "1.0.0", "Determines whether one or more keys exist.", "O(N) where N is the number of keys to check."),
    cmd!("type", 2, RF, 1, 1, 1, k::type_cmd, "generic", "1.0.0", "Determines the type of value stored at a key.", "O(1)"),
    cmd!("rename", 3, W, 1, 2, 1, k::rename, "generic", "1.0.0", "Renames a key and overwrites the destination.", "O(1)"),
    cmd!("renamenx", 3, WF, 1, 2, 1, k::renamenx, "generic", "1.0.0", "Renames a key only when the target key name doesn't exist.", "O(1)"),
    cmd!("copy", -3, WD, 1, 2, 1, k::copy, "generic", "6.2.0", "Copies the value of a key to a new key.", "O(N) worst case for collections, where N is the number of nested items. O(1) for string values."),
    cmd!("move", 3, WF, 1, 1, 1, k::move_cmd, "generic", "1.0.0", "Moves a key to another database.", "O(1)"),
    cmd!("keys", 2, R, 0, 0, 0, k::keys, "generic", "1.0.0", "Returns all key names that match a pattern.", "O(N) with N being the number of keys in the database"),
    cmd!("scan", -2, R | TOUCHES_ARBITRARY_KEYS, 0, 0, 0, k::scan, "generic", "2.8.0", "Iterates over the key names in the database.", "O(1) for every call. O(N) for a complete iteration."),
    cmd!("randomkey", 1, R | RANDOM | TOUCHES_ARBITRARY_KEYS, 0, 0, 0, k::randomkey, "generic", "1.0.0", "Returns a random key name from the database.", "O(1)"),
    cmd!("touch", -2, RF, 1, -1, 1, k::touch, "generic", "3.2.1", "Returns the number of existing keys out of those specified after updating the time they were last accessed.", "O(N) where N is the number of keys that will be touched."),
    cmd!("object", -2, R | CONTAINER, 2, 2, 1, k::object, "generic", "2.2.3", "A container for object introspection commands.", "Depends on subcommand."),
    cmd!("expire", -3, WF, 1, 1, 1, ex::expire, "generic", "1.0.0", "Sets the expiration time of a key in seconds.", "O(1)"),
    cmd!("pexpire", -3, WF, 1, 1, 1, ex::pexpire, "generic", "2.6.0", "Sets the expiration time of a key in milliseconds.", "O(1)"),
    cmd!("expireat", -3, WF, 1, 1, 1, ex::expireat, "generic", "1.2.0", "Sets the expiration time of a key to a Unix timestamp.", "O(1)"),
    cmd!("pexpireat", -3, WF, 1, 1, 1, ex::pexpireat, "generic", "2.6.0", "Sets the expiration time of a key to a Unix milliseconds timestamp.", "O(1)"),
    cmd!("ttl", 2, RF, 1, 1, 1, ex::ttl, "generic", "1.0.0", "Returns the expiration time in seconds of a key.", "O(1)"),
    cmd!("pttl", 2, RF, 1, 1, 1, ex::pttl, "generic", "2.6.0", "Returns the expiration time in milliseconds of a key.", "O(1)"),
    cmd!("expiretime", 2, RF, 1, 1, 1, ex::expiretime, "generic", "7.0.0", "Returns the expiration time of a key as a Unix timestamp.", "O(1)"),
    cmd!("pexpiretime", 2, RF, 1, 1, 1, ex::pexpiretime, "generic", "7.0.0", "Returns the expiration time of a key as a Unix milliseconds timestamp.", "O(1)"),
    cmd!("persist", 2, WF, 1, 1, 1, ex::persist, "generic", "2.2.0", "Removes the expiration time of a key.", "O(1)"),
    // connection
    cmd!("ping", -1, FAST, 0, 0, 0, conn::ping, "connection", "1.0.0", "Returns the server's liveliness response.", "O(1)"),
    cmd!("echo", 2, FAST, 0, 0, 0, conn::echo, "connection", "1.0.0", "Returns the given string.", "O(1)"),
    cmd!("quit", -1, CONN | NOAUTH | ALLOW_BUSY, 0, 0, 0, conn::quit, "connection", "1.0.0", "Closes the connection.", "O(1)"),
    cmd!("reset", 1, CONN | NOAUTH | ALLOW_BUSY, 0, 0, 0, conn::reset, "connection", "6.2.0", "Resets the connection.", "O(1)"),
    cmd!("hello", -1, CONN | NOAUTH | ALLOW_BUSY, 0, 0, 0, conn::hello, "connection", "6.0.0", "Handshakes with the Redis server.", "O(1)"),
    cmd!("auth", -2, CONN | NOAUTH | ALLOW_BUSY, 0, 0, 0, conn::auth, "connection", "1.0.0", "Authenticates the connection.", "O(N) where N is the number of passwords defined for the user"),
    cmd!("select", 2, LOADING | STALE | FAST, 0, 0, 0, conn::select, "connection", "1.0.0", "Changes the selected database.", "O(1)"),
    cmd!("client", -2, NOSCRIPT | LOADING | STALE | CONTAINER, 0, 0, 0, conn::client, "connection", "2.4.0", "A container for client connection commands.", "Depends on subcommand."),
    // server
    cmd!("swapdb", 3, WF, 0, 0, 0, srvc::swapdb, "server", "4.0.0", "Swaps two Redis databases.", "O(N) where N is the count of clients watching or blocking on keys from both databases."),
    cmd!("dbsize", 1, RF, 0, 0, 0, srvc::dbsize, "server", "1.0.0", "Returns the number of keys in the database.", "O(1)"),
    cmd!("flushdb", -1, W, 0, 0, 0, srvc::flushdb, "server", "1.0.0", "Remove all keys from the current database.", "O(N) where N is the number of keys in the selected database"),
    cmd!("flushall", -1, W, 0, 0, 0, srvc::flushall, "server", "1.0.0", "Removes all keys from all databases.", "O(N) where N is the total number of keys in all databases"),
    cmd!("info", -1, LOADING | STALE, 0, 0, 0, inf::info, "server", "1.0.0", "Returns information and statistics about the server.", "O(1)"),
    cmd!("time", 1, LOADING | STALE | FAST | RANDOM, 0, 0, 0, srvc::time, "server", "2.6.0", "Returns the server time.", "O(1)"),
    cmd!("command", -1, LOADING | STALE | CONTAINER, 0, 0, 0, cmd::command, "server", "2.8.13", "Returns detailed information about all commands.", "O(N) where N is the total number of Redis commands"),
    cmd!("config", -2, ADMIN | NOSCRIPT | LOADING | STALE | CONTAINER, 0, 0, 0, cfg::config, "server", "2.0.0", "A container for server configuration commands.", "Depends on subcommand."),
    cmd!("debug", -2, ADMIN | NOSCRIPT | LOADING | STALE, 0, 0, 0, srvc::debug, "server", "1.0.0", "A container for debugging commands.", "Depends on subcommand."),
    cmd!("module", -2, ADMIN | NOSCRIPT | CONTAINER, 0, 0, 0, srvc::module, "server", "4.0.0", "A container for module commands.", "Depends on subcommand."),
    cmd!("shutdown", -1, ADMIN | NOSCRIPT | LOADING | STALE | ALLOW_BUSY | NO_MULTI, 0, 0, 0, srvc::shutdown, "server", "1.0.0", "Synchronously saves the database(s) to disk and shuts down the Redis server.", "O(N) when saving, where N is the total number of keys in all databases when saving data, otherwise O(1)"),
    cmd!("save", 1, ADMIN | NOSCRIPT | NO_MULTI, 0, 0, 0, srvc::save, "server", "1.0.0", "Synchronously saves the database(s) to disk.", "O(N) where N is the total number of keys in all databases"),
    cmd!("bgsave", -1, ADMIN | NOSCRIPT, 0, 0, 0, srvc::bgsave, "server", "1.0.0", "Asynchronously saves the database(s) to disk.", "O(1)"),
    cmd!("bgrewriteaof", 1, ADMIN | NOSCRIPT, 0, 0, 0, srvc::bgrewriteaof, "server", "1.0.0", "Asynchronously rewrites the append-only file to disk.", "O(1)"),
    cmd!("monitor", 1, ADMIN | NOSCRIPT | LOADING | STALE, 0, 0, 0, mon::monitor, "server", "1.0.0", "Listens for all requests received by the server in real-time.", ""),
    cmd!("slowlog", -2, ADMIN | LOADING | STALE | CONTAINER, 0, 0, 0, sl::slowlog, "server", "2.2.12", "A container for slow log commands.", "Depends on subcommand."),
    cmd!("multi", 1, NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY, 0, 0, 0, tx::multi, "transactions", "1.2.0", "Starts a transaction.", "O(1)"),
    cmd!("exec", 1, NOSCRIPT | LOADING | STALE, 0, 0, 0, tx::exec, "transactions", "1.2.0", "Executes all commands in a transaction.", "Depends on commands in the transaction"),
    cmd!("discard", 1, NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY, 0, 0, 0, tx::discard, "transactions", "2.0.0", "Discards a transaction.", "O(N), when N is the number of queued commands"),
    cmd!("watch", -2, NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY, 1, -1, 1, tx::watch, "transactions", "2.2.0", "Monitors changes to keys to determine the execution of a transaction.", "O(1) for every key."),
    cmd!("unwatch", 1, NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY, 0, 0, 0, tx::unwatch, "transactions", "2.2.0", "Forgets about watched keys of a transaction.", "O(1)"),
    cmd!("subscribe", -2, PUBSUB | NOSCRIPT | LOADING | STALE, 0, 0, 0, ps::subscribe, "pubsub", "2.0.0", "Listens for messages published to channels.", "O(N) where N is the number of channels to subscribe to."),
    cmd!("unsubscribe", -1, PUBSUB | NOSCRIPT | LOADING | STALE, 0, 0, 0, ps::unsubscribe, "pubsub", "2.0.0", "Stops listening to messages posted to channels.", "O(N) where N is the number of channels to unsubscribe."),
    cmd!("psubscribe", -2, PUBSUB | NOSCRIPT | LOADING | STALE, 0, 0, 0, ps::psubscribe, "pubsub", "2.0.0", "Listens for messages published to channels that match one or more patterns.", "O(N) where N is the number of patterns to subscribe to."),
    cmd!("punsubscribe", -1, PUBSUB | NOSCRIPT | LOADING | STALE, 0, 0, 0, ps::punsubscribe, "pubsub", "2.0.0", "Stops listening to messages published to channels that match one or more patterns.", "O(N) where N is the number of patterns to unsubscribe."),
    cmd!("ssubscribe", -2, PUBSUB | NOSCRIPT | LOADING | STALE, 1, -1, 1, ps::ssubscribe, "pubsub", "7.0.0", "Listens for messages published to shard channels.", "O(N) where N is the number of shard channels to subscribe to."),
    cmd!("sunsubscribe", -1, PUBSUB | NOSCRIPT | LOADING | STALE, 1, -1, 1, ps::sunsubscribe, "pubsub", "7.0.0", "Stops listening to messages posted to shard channels.", "O(N) where N is the number of shard channels to unsubscribe."),
    cmd!("publish", 3, PUBSUB | LOADING | STALE | FAST, 0, 0, 0, ps::publish, "pubsub", "2.0.0", "Posts a message to a channel.", "O(N+M) where N is the number of clients subscribed to the receiving channel and M is the total number of subscribed patterns (by any client)."),
    cmd!("spublish", 3, PUBSUB | LOADING | STALE | FAST, 1, 1, 1, ps::spublish, "pubsub", "7.0.0", "Post a message to a shard channel", "O(N) where N is the number of clients subscribed to the receiving shard channel."),
    cmd!("pubsub", -2, CONTAINER, 0, 0, 0, ps::pubsub, "pubsub", "2.8.0", "A container for Pub/Sub commands.", "Depends on subcommand."),
    cmd!("lastsave", 1, LOADING | STALE | FAST | RANDOM, 0, 0, 0, srvc::lastsave, "server", "1.0.0", "Returns the Unix timestamp of the last successful save to disk.", "O(1)"),
];
