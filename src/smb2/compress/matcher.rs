//! The LZ77 match search both of our encoders use (`lz77` and `huffman`, for `sqos synth
//! --compress`): greedy, hash chains over three-byte prefixes. The formats differ only in how
//! far back a match may reach, how long it may be, and whether it may cross a block end.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Token {
    Literal(u8),
    /// `len` >= 3 bytes copied from `dist` bytes back.
    Match {
        len: usize,
        dist: usize,
    },
}

/// What one format allows.
pub(super) struct Limits {
    /// The farthest a match may reach back.
    pub max_dist: usize,
    /// The longest match the format can say.
    pub max_len: usize,
    /// Matches never run past a multiple of this (each block is decoded on its own).
    pub block: Option<usize>,
    /// Size of the hash head table: 2^hash_bits entries.
    pub hash_bits: u32,
}

/// Candidates looked at per position: enough for synthetic traffic, cheap enough for 1 GiB.
const CHAIN: usize = 8;
const NONE: usize = usize::MAX;

fn hash3(b: &[u8], bits: u32) -> usize {
    let v = u32::from(b[0]) | u32::from(b[1]) << 8 | u32::from(b[2]) << 16;
    (v.wrapping_mul(0x9E37_79B1) >> (32 - bits)) as usize
}

/// `input` as literals and matches, the longest match among the chain's candidates at each
/// position (the earliest found on ties), a literal where none reaches three bytes.
pub(super) fn tokens(input: &[u8], limits: &Limits) -> Vec<Token> {
    let mut head = vec![NONE; 1 << limits.hash_bits];
    let mut prev = vec![NONE; input.len()];
    let mut out = Vec::new();
    let mut i = 0usize;
    while i < input.len() {
        let end = match limits.block {
            Some(block) => input.len().min((i / block + 1) * block),
            None => input.len(),
        };
        let max = (end - i).min(limits.max_len);
        let (mut best, mut dist) = (0usize, 0usize);
        if i + 3 <= input.len() && max >= 3 {
            let mut c = head[hash3(&input[i..], limits.hash_bits)];
            for _ in 0..CHAIN {
                if c == NONE || i - c > limits.max_dist {
                    break;
                }
                let n = input[c..]
                    .iter()
                    .zip(&input[i..i + max])
                    .take_while(|(a, b)| a == b)
                    .count();
                if n > best {
                    best = n;
                    dist = i - c;
                }
                c = prev[c];
            }
        }
        let step = if best >= 3 {
            out.push(Token::Match { len: best, dist });
            best
        } else {
            out.push(Token::Literal(input[i]));
            1
        };
        for k in i..i + step {
            if k + 3 <= input.len() {
                let h = hash3(&input[k..], limits.hash_bits);
                prev[k] = head[h];
                head[h] = k;
            }
        }
        i += step;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        max_dist: 8192,
        max_len: 1 << 16,
        block: None,
        hash_bits: 14,
    };

    #[test]
    fn repeats_become_one_match() {
        let toks = tokens(b"abcabcabcabc", &LIMITS);
        assert_eq!(
            toks,
            vec![
                Token::Literal(b'a'),
                Token::Literal(b'b'),
                Token::Literal(b'c'),
                Token::Match { len: 9, dist: 3 },
            ]
        );
    }

    #[test]
    fn matches_stop_at_a_block_end_and_at_the_distance_limit() {
        let input = vec![7u8; 40];
        let block = Limits {
            block: Some(16),
            ..LIMITS
        };
        let lens: Vec<usize> = tokens(&input, &block)
            .iter()
            .map(|t| match t {
                Token::Literal(_) => 1,
                Token::Match { len, .. } => *len,
            })
            .collect();
        // 1 literal + 15 to the first block end, then 16 and 8 more.
        assert_eq!(lens, vec![1, 15, 16, 8]);
        let near = Limits {
            max_dist: 2,
            ..LIMITS
        };
        let far = b"abcdefabc";
        assert!(tokens(far, &near)
            .iter()
            .all(|t| matches!(t, Token::Literal(_))));
    }
}
