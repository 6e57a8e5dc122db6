//! The vocabulary of the address analysis ([`super::affine`]): hash-consed expressions over a
//! launch's registers, an entry's params and values the analysis does not follow, the facts
//! (conditions) it keeps, and what it found per entry ([`Forms`]).

use std::collections::{BTreeSet, HashMap};

use super::memory::{AddrSpace, Role};

pub type ExprId = u32;

/// A launch register: `%ctaid`, `%tid`, `%ntid`, `%nctaid`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Special {
    Ctaid,
    Tid,
    Ntid,
    Nctaid,
}

/// Operations in `bits`-bit registers whose result is the exact one modulo 2^bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ring {
    Add,
    Sub,
    Mul,
    Shl,
}

/// Operations evaluated only on exact operands (their result depends on more than the low bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ExactOp {
    Rem,
    Div,
    And,
    /// `or` with a constant: followed where no bit of the constant can meet a bit of the value (then
    /// it is an add: the compiler's form of an add it proved carry-free).
    Or,
    Shr,
    Min,
    Max,
}

/// A comparison (`setp`), normalised: `lo`/`ls`/`hi`/`hs` are `lt`/`le`/`gt`/`ge` unsigned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Cmp {
    pub fn negated(self) -> Cmp {
        match self {
            Cmp::Eq => Cmp::Ne,
            Cmp::Ne => Cmp::Eq,
            Cmp::Lt => Cmp::Ge,
            Cmp::Le => Cmp::Gt,
            Cmp::Gt => Cmp::Le,
            Cmp::Ge => Cmp::Lt,
        }
    }
    /// `b op' a` equivalent to `a op b`.
    pub fn swapped(self) -> Cmp {
        match self {
            Cmp::Lt => Cmp::Gt,
            Cmp::Le => Cmp::Ge,
            Cmp::Gt => Cmp::Lt,
            Cmp::Ge => Cmp::Le,
            c => c,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Expr {
    Const(i128),
    Special(Special, u8),
    /// A scalar param's bytes, zero-extended.
    Scalar(usize),
    /// A buffer param's pointer.
    Base(usize),
    Ring(Ring, ExprId, ExprId, u8),
    /// The low `from` bits of `of`, zero- or sign-extended.
    Ext {
        of: ExprId,
        from: u8,
        signed: bool,
    },
    Exact(ExactOp, ExprId, ExprId, u8, bool),
    /// A predicate: `a op b` on `bits`-bit values, signed or not.
    Cmp(Cmp, ExprId, ExprId, u8, bool),
    Not(ExprId),
    And(ExprId, ExprId),
    Or(ExprId, ExprId),
    /// `cond ? a : b` (`selp`, a predicated definition).
    Select(ExprId, ExprId, ExprId),
    /// The value of register `reg` where paths meet at the start of block `block`.
    Phi(u32, u32),
    /// A value the analysis does not follow: why, and the instruction (item index) that made it.
    Opaque(Why, usize),
}

impl Expr {
    /// The expressions it is made of (a phi's incoming values are in [`Forms::phis`]).
    pub fn operands(&self) -> Vec<ExprId> {
        match self {
            Expr::Ring(_, a, b, _) | Expr::Exact(_, a, b, _, _) | Expr::Cmp(_, a, b, _, _) | Expr::And(a, b) | Expr::Or(a, b) => vec![*a, *b],
            Expr::Ext { of, .. } | Expr::Not(of) => vec![*of],
            Expr::Select(c, a, b) => vec![*c, *a, *b],
            _ => Vec::new(),
        }
    }
}

/// Why a value is opaque.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Why {
    Loaded,
    NotFollowed,
    Undefined,
    /// Computed by a chain of more than [`MAX_EXPR_DEPTH`] operations: the analyses walk expressions
    /// recursively, so a longer chain is not followed rather than risk the stack.
    TooDeep,
}

/// The longest chain of operations an expression may be built of (each operand one level down); a
/// compiler's address arithmetic is a few dozen deep.
pub const MAX_EXPR_DEPTH: u32 = 512;

/// A condition: the predicate, and whether it holds (`true`) or fails.
pub type Fact = (ExprId, bool);

/// One incoming value of a phi: from block `from`, the value (`None`: undefined on that path), and the
/// facts of that edge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Incoming {
    pub from: u32,
    pub value: Option<ExprId>,
    pub facts: Vec<Fact>,
    /// A loop's back edge (from a block at or after the phi's).
    pub back: bool,
}

/// How many bytes an access touches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Width {
    Bytes(u64),
    /// A copy whose size is this value (`cp.async.bulk … size`).
    Expr(ExprId),
}

/// One global (or generic) memory access.
#[derive(Clone, Debug)]
pub struct Access {
    /// Item index of the instruction in the entry.
    pub item: usize,
    /// Index of its address operand (for the taint analysis' attribution).
    pub operand: usize,
    pub space: AddrSpace,
    pub role: Role,
    /// The byte address; `None` where the instruction touches memory by no address (a call, a texture).
    pub addr: Option<ExprId>,
    pub width: Option<Width>,
    /// What holds where it runs.
    pub facts: Vec<Fact>,
}

/// The expressions of one entry.
#[derive(Debug, Default)]
pub struct Forms {
    exprs: Vec<Expr>,
    index: HashMap<Expr, ExprId>,
    /// Per expression, the blocks whose phis it refers to.
    mentions: Vec<Vec<u32>>,
    /// Per expression, the longest chain of operations it is built of.
    depth: Vec<u32>,
    pub phis: HashMap<(u32, u32), Vec<Incoming>>,
    /// Register names by index (messages).
    pub regs: Vec<String>,
    /// Blocks: first item index; `is_header`: a back edge enters it.
    pub block_start: Vec<usize>,
    pub is_header: Vec<bool>,
    /// Per loop head: the facts every back edge into it holds, about the values of the iteration that
    /// takes it (its phis as they were in that iteration).
    pub back: HashMap<u32, Vec<Fact>>,
    pub accesses: Vec<Access>,
    /// The first instruction (item index) that computed each expression, for messages.
    pub origin: HashMap<ExprId, usize>,
    /// Why the entry as a whole cannot be followed (an indirect branch, no fixpoint).
    pub failed: Option<String>,
}

impl Forms {
    pub fn expr(&self, e: ExprId) -> &Expr {
        &self.exprs[e as usize]
    }
    pub fn mentions(&self, e: ExprId, block: u32) -> bool {
        self.mentions[e as usize].binary_search(&block).is_ok()
    }
    pub(super) fn intern(&mut self, e: Expr) -> ExprId {
        if let Some(&id) = self.index.get(&e) {
            return id;
        }
        let kids = e.operands();
        let depth = 1 + kids.iter().map(|&k| self.depth[k as usize]).max().unwrap_or(0);
        if depth > MAX_EXPR_DEPTH {
            // Named after the instruction that made the deepest operand.
            let deepest = kids.iter().copied().max_by_key(|&k| self.depth[k as usize]);
            let item = deepest.and_then(|k| self.origin.get(&k)).copied().unwrap_or(0);
            return self.intern(Expr::Opaque(Why::TooDeep, item));
        }
        let mut m: BTreeSet<u32> = kids.iter().flat_map(|&k| self.mentions[k as usize].iter().copied()).collect();
        if let Expr::Phi(b, _) = e {
            m.insert(b);
        }
        let id = self.exprs.len() as ExprId;
        self.exprs.push(e.clone());
        self.mentions.push(m.into_iter().collect());
        self.depth.push(depth);
        self.index.insert(e, id);
        id
    }
}

/// The values a `bits`-bit register holds, read signed or not.
pub fn domain(bits: u8, signed: bool) -> (i128, i128) {
    let b = u32::from(bits);
    if signed {
        (-(1i128 << (b - 1)), (1i128 << (b - 1)) - 1)
    } else {
        (0, (1i128 << b) - 1)
    }
}

/// An integer immediate: `12`, `-4`, `0xFF`, `7U`.
pub fn immediate(o: &str) -> Option<i128> {
    let o = o.trim().trim_end_matches('U');
    let (neg, digits) = match o.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, o),
    };
    let v = match digits.strip_prefix("0x").or_else(|| digits.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok()? as i128,
        None => digits.parse::<u64>().ok()? as i128,
    };
    Some(if neg { -v } else { v })
}
