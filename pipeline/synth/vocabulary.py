"""The synthetic corpus's vocabulary: topics, names, venues, filler words, the shapes of
dates, and the headings and traps a generated paper draws from (:mod:`pipeline.synth.generator`
uses them; nothing here draws a random number)."""

from __future__ import annotations

from datetime import datetime

CS_TOPICS: dict[str, tuple[str, ...]] = {
    "cs.CL": (
        "Machine Translation",
        "Question Answering",
        "Named Entity Recognition",
        "Text Summarization",
        "Sentiment Analysis",
        "Dialogue Systems",
    ),
    "cs.CV": (
        "Object Detection",
        "Semantic Segmentation",
        "Image Captioning",
        "Person Re-Identification",
        "Video Action Recognition",
    ),
    "cs.LG": (
        "Federated Learning",
        "Graph Representation Learning",
        "Continual Learning",
        "Offline Reinforcement Learning",
        "Self-Supervised Learning",
    ),
    "cs.IR": (
        "Recommender Systems",
        "Dense Passage Retrieval",
        "Learning to Rank",
        "Conversational Search",
    ),
    "cs.SE": (
        "Bug Localization",
        "Code Generation",
        "Automated Program Repair",
        "Test Case Prioritization",
    ),
    "cs.AI": (
        "Knowledge Graph Completion",
        "Automated Planning",
        "Explainable Artificial Intelligence",
    ),
    "cs.DB": ("Query Optimization", "Data Cleaning", "Entity Resolution"),
    "cs.CR": (
        "Intrusion Detection",
        "Adversarial Examples",
        "Differential Privacy",
        "Malware Detection",
    ),
    "cs.RO": ("Motion Planning", "Visual SLAM"),
    "cs.DC": ("Serverless Computing", "Edge Computing"),
}
CS_WEIGHTS = {
    "cs.CL": 4,
    "cs.CV": 5,
    "cs.LG": 5,
    "cs.IR": 2,
    "cs.SE": 2,
    "cs.AI": 2,
    "cs.DB": 1,
    "cs.CR": 2,
    "cs.RO": 1,
    "cs.DC": 1,
}
NONCS_TOPICS: dict[str, tuple[str, ...]] = {
    "math.PR": ("Random Polynomials", "Percolation Theory", "Stochastic Differential Equations"),
    "math.AP": ("Navier-Stokes Equations", "Nonlinear Schrodinger Equations"),
    "math.CO": ("Extremal Graph Theory", "Ramsey Theory"),
    "physics.optics": ("Optical Metasurfaces", "Nonlinear Photonics"),
    "cond-mat.str-el": ("Quantum Spin Liquids", "Topological Insulators"),
    "quant-ph": ("Quantum Error Correction", "Variational Quantum Algorithms"),
    "astro-ph.GA": ("Galaxy Formation", "Stellar Populations"),
    "hep-th": ("Holographic Duality", "String Compactifications"),
    "q-bio.GN": ("Genome Assembly", "Single-Cell Sequencing"),
    "stat.ME": ("Causal Inference", "Bayesian Nonparametrics"),
    "eess.SP": ("Massive MIMO", "Compressed Sensing"),
    "econ.EM": ("Difference-in-Differences Estimation",),
}
NONCS_WEIGHTS = {
    "math.PR": 2,
    "math.AP": 2,
    "math.CO": 2,
    "physics.optics": 2,
    "cond-mat.str-el": 3,
    "quant-ph": 3,
    "astro-ph.GA": 3,
    "hep-th": 2,
    "q-bio.GN": 1,
    "stat.ME": 2,
    "eess.SP": 2,
    "econ.EM": 1,
}
CROSS_LISTS = {
    "cs.CL": ("cs.AI", "cs.LG", "cs.IR"),
    "cs.CV": ("cs.LG", "cs.AI", "eess.IV"),
    "cs.LG": ("stat.ML", "cs.AI", "math.OC"),
    "cs.IR": ("cs.CL", "cs.LG", "cs.DB"),
    "cs.SE": ("cs.LG", "cs.PL", "cs.AI"),
    "cs.AI": ("cs.LG", "cs.CL", "cs.LO"),
    "cs.DB": ("cs.DS", "cs.IR", "cs.LG"),
    "cs.CR": ("cs.LG", "cs.NI", "cs.SE"),
    "cs.RO": ("cs.CV", "cs.AI", "eess.SY"),
    "cs.DC": ("cs.NI", "cs.PF", "cs.LG"),
    "math.PR": ("math.CA", "math.CV", "math-ph"),
    "math.AP": ("math.DS", "math-ph", "math.NA"),
    "math.CO": ("cs.DM", "math.PR"),
    "physics.optics": ("physics.app-ph", "cond-mat.mes-hall"),
    "cond-mat.str-el": ("cond-mat.mes-hall", "quant-ph"),
    "quant-ph": ("cs.ET", "cond-mat.str-el", "cs.LG"),
    "astro-ph.GA": ("astro-ph.CO", "astro-ph.SR"),
    "hep-th": ("gr-qc", "hep-ph"),
    "q-bio.GN": ("q-bio.QM", "cs.LG"),
    "stat.ME": ("stat.ML", "econ.EM", "stat.AP"),
    "eess.SP": ("cs.IT", "math.IT"),
    "econ.EM": ("stat.ME",),
}
DISCIPLINES = {
    "cs": "Computer Science",
    "math": "Mathematics",
    "stat": "Statistics",
    "q-bio": "Quantitative Biology",
    "eess": "Electrical Engineering and Systems Science",
    "econ": "Economics",
}
CS_FAMILIES = (
    "Graph Neural Networks",
    "Transformers",
    "Contrastive Learning",
    "Large Language Models",
    "Reinforcement Learning",
    "Diffusion Models",
    "Knowledge Distillation",
    "Meta-Learning",
    "Attention Mechanisms",
    "Convolutional Neural Networks",
    "Variational Autoencoders",
    "Prompt Learning",
    "Retrieval-Augmented Generation",
    "Probabilistic Models",
    "Information Retrieval Techniques",
    "Active Learning",
    "Data Augmentation",
    "Rule-Based Systems",
)
NONCS_FAMILIES = (
    "Monte Carlo Methods",
    "Spectral Methods",
    "Renormalization Group Techniques",
    "Variational Principles",
    "Perturbation Theory",
    "Bayesian Hierarchical Models",
    "Tensor Network Methods",
    "Numerical Simulations",
)
ADJECTIVES = (
    "Efficient",
    "Robust",
    "Scalable",
    "Interpretable",
    "Unsupervised",
    "Few-Shot",
    "Lightweight",
    "Adaptive",
    "Hierarchical",
    "Multi-Modal",
    "Cross-Lingual",
    "Privacy-Preserving",
)
NAME_HEADS = (
    "Deep",
    "Graph",
    "Fast",
    "Meta",
    "Neuro",
    "Trans",
    "Contra",
    "Hyper",
    "Sparse",
    "Auto",
    "BL",
    "Co",
)
NAME_TAILS = (
    "Loc",
    "Rank",
    "Net",
    "Former",
    "Match",
    "GNN",
    "Seg",
    "Det",
    "Rec",
    "Fix",
    "Gen",
    "QA",
    "iR",
    "Ba",
)
# A systematic review's protocol steps (real headings; roles.PROTOCOL reads them as method)
PROTOCOL_STEPS = (
    "Research Questions",
    "Search Strategy",
    "Inclusion and Exclusion Criteria",
    "Study Selection",
    "Data Extraction",
    "Quality Assessment",
)

ASPECTS = (
    "Architectures",
    "Training Strategies",
    "Pre-training Objectives",
    "Supervised Approaches",
    "Unsupervised Approaches",
    "Hybrid Approaches",
    "Multi-Task Variants",
    "Efficiency Improvements",
    "Domain Adaptation",
)
# Non-surveys whose titles trip naive survey detectors: (category, title, abstract kind).
TRAPS = (
    ("cs.SE", "Automated Code Review with {family}", "code_review"),
    ("cs.CL", "Predicting Peer Review Outcomes with {family}", "peer_review"),
    ("cs.AI", "Survey Propagation for Random k-SAT{suffix}", "survey_propagation"),
    ("cs.SE", "A Questionnaire Survey of Developers' Testing Practices{suffix}", "questionnaire"),
    ("cs.IR", "Review-based Recommendation with {family}", "review_rec"),
    ("cs.CL", "Generating Literature Reviews with LLMs{suffix}", "litreview_gen"),
)
TRAP_SHARE = 0.06
TRAP_SUFFIXES = ("", ": An Empirical Study", " Revisited", " at Scale")
FIRST_NAMES = (
    "Marcus", "Xuan-Truong", "Filip", "Matt", "Laura", "José", "Zoë", "Łukasz", "Søren", "Chloé",
    "Mehmet", "Wei", "Xiaoyu", "Priya", "Anna", "Joseph A.", "Raúl", "Yuki", "Olga", "Ahmed",
    "Sofia", "Daniel", "Min-Jun", "Fatima", "Lucas", "Ingrid", "Tomás", "Aarav", "Elena", "Kwame",
)  # fmt: skip
LAST_NAMES = (
    "Michelen", "Vu", "Zamfirov", "Allen", "Martínez-Ferrer", "Müller", "García", "Nguyen",
    "Østergaard", "Kovačević", "Smith", "Wang", "Li", "Zhang", "Kumar", "Tanaka", "Ivanova",
    "Hassan", "Rossi", "Silva", "Kim", "Okafor", "Dubois", "Jensen", "Novák", "Chen", "Brown",
    "Schröder", "Yılmaz", "Peña",
)  # fmt: skip
# arXiv metadata spells accents in TeX while authors_parsed uses Unicode.
TEX_ACCENTS = {
    "é": "\\'e", "í": "\\'i", "á": "\\'a", "ó": "\\'o", "ú": "\\'u", "ü": '\\"u', "ö": '\\"o',
    "ë": '\\"e', "ø": "{\\o}", "Ø": "{\\O}", "ł": "{\\l}", "Ł": "{\\L}", "č": "\\v{c}",
    "ñ": "\\~n", "ı": "{\\i}",
}  # fmt: skip
FILLER_WORDS = (
    "the", "of", "a", "we", "model", "method", "results", "approach", "performance", "data",
    "propose", "show", "that", "is", "in", "for", "with", "on", "this", "our", "which",
    "training", "learning", "task", "tasks", "baseline", "baselines", "accuracy", "evaluation",
    "datasets", "experiments", "framework", "network", "representation", "features", "input",
    "output", "loss", "function", "optimization", "parameters", "large", "small", "improves",
    "significantly", "however", "moreover", "therefore", "consider", "given", "each", "set",
    "between", "under", "over", "these", "those", "can", "be", "are", "has", "have", "not",
    "also", "both", "such", "as", "more", "than", "while", "where", "when", "all", "its",
    "their", "one", "two", "first", "second", "finally", "further", "existing", "proposed",
    "novel", "state-of-the-art", "empirical", "theoretical", "analysis", "bound", "estimate",
    "distribution", "probability", "random", "variable", "sequence", "structure", "graph",
    "node", "edge", "layer", "attention", "embedding", "vector", "matrix", "space", "dimension",
    "sample", "samples", "error", "rate", "time", "complexity", "linear", "nonlinear", "local",
    "global", "robust", "efficient", "scalable", "signal", "noise", "source", "target",
    "domain", "transfer", "prior", "posterior", "inference", "objective", "constraint",
    "solution", "problem", "setting", "case", "condition", "assumption", "theorem", "lemma",
    "proof", "follows", "holds", "obtain", "compute", "define", "denote", "let", "then",
    "thus", "hence", "since", "because", "although", "observe", "note", "respectively",
    "compared", "achieves", "outperforms", "yields", "leads", "to", "from", "by", "into",
    "via", "using", "used", "based", "approximately", "naïve", "Schrödinger", "régime",
    "up", "to", "an", "it", "at", "or", "and", "and", "the", "the", "of", "in",
)  # fmt: skip
LATEX = (
    "\\mu ", "X_1,X_2,\\ldots ", "\\mathbb {E}[X_i]", "k \\le \\log n / (5 \\log \\log n)",
    "f(x)=\\sum _{i=1}^{n} w_i x_i", "\\mathcal {L}_{\\text{CE}}", "\\theta ^{*}",
    "\\Vert \\nabla f(x)\\Vert _2^2 \\le \\epsilon ", "O(n \\log n)", "\\alpha =0.1",
    "p(y|x)=\\frac{\\exp (s_y)}{\\sum _j \\exp (s_j)}", "\\mathbf {h}_v^{(l+1)}", "n\\rightarrow \\infty ",
    "\\begin{@align*}{1}{-1}P_n(z)=(z-X_1)\\ldots (z-X_n)\\,.\\end{@align*}", "\\lambda _{\\max }",
    "\\mathcal {O}(d^2)", "x \\in \\mathbb {R}^d", "H=\\sum _{\\langle ij\\rangle } J\\, S_i \\cdot S_j",
)  # fmt: skip
CAPTIONS = (
    "Overview of the proposed framework.",
    "Results on the test set; best scores in bold.",
    "NO_CAPTION",
    "Ablation study of the main components.",
    "Taxonomy of existing approaches.",
    "Statistics of the datasets used in our experiments.",
)
CS_VENUES = (
    "Advances in Neural Information Processing Systems",
    "Proceedings of the AAAI Conference on Artificial Intelligence",
    "Proceedings of the 58th Annual Meeting of the Association for Computational Linguistics",
    "IEEE Transactions on Pattern Analysis and Machine Intelligence",
    "Proceedings of the IEEE/CVF Conference on Computer Vision and Pattern Recognition",
    "ACM Computing Surveys",
    "Proceedings of the 44th International ACM SIGIR Conference",
    "Proceedings of the 43rd International Conference on Software Engineering",
    "International Conference on Learning Representations",
    "Proceedings of the VLDB Endowment",
)
NONCS_VENUES = (
    "Physical Review B",
    "Physical Review Letters",
    "Trans. Amer. Math. Soc.",
    "Probability Theory and Related Fields",
    "The Astrophysical Journal",
    "Journal of High Energy Physics",
    "Bioinformatics",
    "Journal of the American Statistical Association",
    "Nature Physics",
)
LICENSES = (
    ("http://creativecommons.org/licenses/by/4.0/", 60),
    ("http://arxiv.org/licenses/nonexclusive-distrib/1.0/", 25),
    ("http://creativecommons.org/licenses/by-sa/4.0/", 5),
    ("http://creativecommons.org/publicdomain/zero/1.0/", 5),
    ("http://creativecommons.org/licenses/by-nc-sa/4.0/", 5),
)
DAY_NAMES = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
MONTH_NAMES = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
YEAR_WEIGHTS = {y: 6 + 2 * (y - 2015) for y in range(2015, 2026)}  # arXiv keeps growing
LAST_DAY = datetime(2025, 12, 30, 23, 59, 59)
