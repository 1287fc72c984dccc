"""The DRUG demo set (DESIGN §6): well-known approved drugs with a textbook one-step disconnection.

Each drug has MW 150-300 and at least one aromatic ring; the rows follow the published study's
retrosynthesis CSV format (`output,input,explanation`) plus `name` and `split`. FEW_SHOT holds
simple textbook reactions (not drugs of the dataset) used as few-shot examples. Written to
pxp/data/demo_data/demo-drug/ by `python -m pxp.data.demo.make_demo`.
"""

from __future__ import annotations

# (name, target SMILES, reactant SMILES, explanation of the one-step disconnection)
DRUGS: list[tuple[str, str, str, str]] = [
    ("Paracetamol", "CC(=O)Nc1ccc(O)cc1", "CC(=O)OC(C)=O.Nc1ccc(O)cc1",
     "Amide disconnection: N-acetylation of 4-aminophenol with acetic anhydride; the more nucleophilic amine "
     "reacts before the phenol."),
    ("Aspirin", "CC(=O)Oc1ccccc1C(=O)O", "CC(=O)OC(C)=O.O=C(O)c1ccccc1O",
     "Ester disconnection: O-acetylation of the phenol of salicylic acid with acetic anhydride (acid catalysed)."),
    ("Ibuprofen", "CC(C)Cc1ccc(C(C)C(=O)O)cc1", "CC(C)Cc1ccc(C(C)O)cc1.[C-]#[O+]",
     "C-C disconnection at the carboxyl: palladium-catalysed carbonylation of 1-(4-isobutylphenyl)ethanol with "
     "carbon monoxide (the BHC process)."),
    ("Benzocaine", "CCOC(=O)c1ccc(N)cc1", "Nc1ccc(C(=O)O)cc1.CCO",
     "Ester disconnection: Fischer esterification of 4-aminobenzoic acid with ethanol under acid catalysis."),
    ("Procaine", "CCN(CC)CCOC(=O)c1ccc(N)cc1", "Nc1ccc(C(=O)O)cc1.CCN(CC)CCO",
     "Ester disconnection: esterification of 4-aminobenzoic acid with 2-(diethylamino)ethanol."),
    ("Lidocaine", "CCN(CC)CC(=O)Nc1c(C)cccc1C", "ClCC(=O)Nc1c(C)cccc1C.CCNCC",
     "C-N disconnection alpha to the amide: SN2 displacement of chloride from "
     "2-chloro-N-(2,6-dimethylphenyl)acetamide by diethylamine."),
    ("Prilocaine", "CCCNC(C)C(=O)Nc1ccccc1C", "CC(Br)C(=O)Nc1ccccc1C.CCCN",
     "C-N disconnection alpha to the amide: SN2 substitution of the 2-bromopropanamide of o-toluidine by "
     "propylamine."),
    ("Phenytoin", "O=C1NC(=O)C(c2ccccc2)(c2ccccc2)N1", "O=C(C(=O)c1ccccc1)c1ccccc1.NC(N)=O",
     "Hydantoin disconnection: base-promoted condensation of benzil with urea followed by a 1,2-phenyl shift "
     "(Biltz synthesis)."),
    ("Phenobarbital", "CCC1(c2ccccc2)C(=O)NC(=O)NC1=O", "CCOC(=O)C(CC)(C(=O)OCC)c1ccccc1.NC(N)=O",
     "Barbiturate disconnection at both amides: condensation of diethyl 2-ethyl-2-phenylmalonate with urea under "
     "sodium ethoxide."),
    ("Diphenhydramine", "CN(C)CCOC(c1ccccc1)c1ccccc1", "BrC(c1ccccc1)c1ccccc1.CN(C)CCO",
     "Ether C-O disconnection: Williamson-type etherification of 2-(dimethylamino)ethanol with "
     "bromodiphenylmethane (SN1 at the benzhydryl carbon)."),
    ("Methylphenidate", "COC(=O)C(c1ccccc1)C1CCCCN1", "O=C(O)C(c1ccccc1)C1CCCCN1.CO",
     "Ester disconnection: acid-catalysed esterification of ritalinic acid with methanol."),
    ("Mexiletine", "CC(N)COc1c(C)cccc1C", "CC(=O)COc1c(C)cccc1C.N",
     "C-N disconnection: reductive amination of 1-(2,6-dimethylphenoxy)propan-2-one with ammonia."),
    ("Propranolol", "CC(C)NCC(O)COc1cccc2ccccc12", "c1ccc2c(OCC3CO3)cccc2c1.CC(C)N",
     "C-N disconnection of the 1,2-amino alcohol: ring opening of the glycidyl ether of 1-naphthol by "
     "isopropylamine at the less hindered carbon."),
    ("Atenolol", "CC(C)NCC(O)COc1ccc(CC(N)=O)cc1", "NC(=O)Cc1ccc(OCC2CO2)cc1.CC(C)N",
     "C-N disconnection of the 1,2-amino alcohol: epoxide opening of the aryl glycidyl ether by isopropylamine."),
    ("Metoprolol", "COCCc1ccc(OCC(O)CNC(C)C)cc1", "COCCc1ccc(OCC2CO2)cc1.CC(C)N",
     "C-N disconnection of the 1,2-amino alcohol: isopropylamine opens the epoxide of 4-(2-methoxyethyl)phenyl "
     "glycidyl ether."),
    ("Naproxen", "COc1ccc2cc(C(C)C(=O)O)ccc2c1", "COC(=O)C(C)c1ccc2cc(OC)ccc2c1.O",
     "Functional group interconversion: hydrolysis of the methyl ester of naproxen to the carboxylic acid."),
    ("Sulfanilamide", "Nc1ccc(S(N)(=O)=O)cc1", "CC(=O)Nc1ccc(S(N)(=O)=O)cc1.O",
     "Amide hydrolysis: removal of the acetyl protecting group from 4-acetamidobenzenesulfonamide with aqueous "
     "acid."),
    ("Sulfadiazine", "Nc1ccc(S(=O)(=O)Nc2ncccn2)cc1", "Nc1ccc(S(=O)(=O)Cl)cc1.Nc1ncccn1",
     "S-N disconnection: sulfonamide formation from 4-aminobenzenesulfonyl chloride and 2-aminopyrimidine."),
    ("Sulfamethoxazole", "Cc1cc(NS(=O)(=O)c2ccc(N)cc2)no1", "Nc1ccc(S(=O)(=O)Cl)cc1.Cc1cc(N)no1",
     "S-N disconnection: sulfonylation of 3-amino-5-methylisoxazole by 4-aminobenzenesulfonyl chloride."),
    ("Chlorzoxazone", "O=c1[nH]c2cc(Cl)ccc2o1", "Nc1cc(Cl)ccc1O.O=C(Cl)Cl",
     "Carbamate disconnection: cyclisation of 2-amino-4-chlorophenol with phosgene to the benzoxazolone."),
    ("Selegiline", "C#CCN(C)[C@H](C)Cc1ccccc1", "CN[C@H](C)Cc1ccccc1.C#CCBr",
     "C-N disconnection: N-propargylation of (R)-N-methylamphetamine with propargyl bromide."),
    ("Rasagiline", "C#CCN[C@@H]1CCc2ccccc21", "N[C@@H]1CCc2ccccc21.C#CCBr",
     "C-N disconnection: N-propargylation of (R)-1-aminoindan with propargyl bromide."),
    ("Bupropion", "CC(NC(C)(C)C)C(=O)c1cccc(Cl)c1", "CC(Br)C(=O)c1cccc(Cl)c1.CC(C)(C)N",
     "C-N disconnection alpha to the ketone: SN2 substitution of 2-bromo-3'-chloropropiophenone by tert-"
     "butylamine."),
    ("Tramadol", "COc1cccc(C2(O)CCCCC2CN(C)C)c1", "CN(C)CC1CCCCC1=O.COc1cccc([Mg]Br)c1",
     "C-C disconnection at the tertiary alcohol: Grignard addition of 3-methoxyphenylmagnesium bromide to "
     "2-(dimethylaminomethyl)cyclohexanone."),
    ("Baclofen", "NCC(CC(=O)O)c1ccc(Cl)cc1", "O=C1CC(c2ccc(Cl)cc2)CN1.O",
     "Amide (lactam) disconnection: hydrolytic ring opening of 4-(4-chlorophenyl)pyrrolidin-2-one to the gamma-"
     "amino acid."),
    ("Fenfluramine", "CCNC(C)Cc1cccc(C(F)(F)F)c1", "CC(=O)Cc1cccc(C(F)(F)F)c1.CCN",
     "C-N disconnection: reductive amination of 1-(3-(trifluoromethyl)phenyl)propan-2-one with ethylamine."),
    ("Ephedrine", "CN[C@@H](C)[C@H](O)c1ccccc1", "CC(=O)[C@H](O)c1ccccc1.CN",
     "C-N disconnection: reductive amination of (R)-phenylacetylcarbinol with methylamine (the industrial route)."),
    ("Guaifenesin", "COc1ccccc1OCC(O)CO", "COc1ccccc1O.OCC(O)CCl",
     "Ether C-O disconnection: Williamson etherification of guaiacol with 3-chloropropane-1,2-diol under base."),
    ("Mephenesin", "Cc1ccccc1OCC(O)CO", "Cc1ccccc1O.OCC(O)CCl",
     "Ether C-O disconnection: Williamson etherification of o-cresol with 3-chloropropane-1,2-diol."),
    ("Lamotrigine", "Nc1nnc(-c2cccc(Cl)c2Cl)c(N)n1", "N#CC(=NNC(=N)N)c1cccc(Cl)c1Cl",
     "Triazine disconnection: base-induced cyclisation of the aminoguanidine hydrazone of 2,3-dichlorobenzoyl "
     "cyanide."),
    ("Carbamazepine", "NC(=O)N1c2ccccc2C=Cc2ccccc21", "c1ccc2c(c1)C=Cc1ccccc1N2.N=C=O",
     "Urea disconnection: carbamoylation of iminostilbene with isocyanic acid (from sodium cyanate and acid)."),
    ("Caffeine", "Cn1c(=O)c2c(ncn2C)n(C)c1=O", "Cn1c(=O)c2[nH]cnc2n(C)c1=O.CI",
     "C-N disconnection: N7-methylation of theophylline with methyl iodide under base."),
    ("Metronidazole", "Cc1ncc([N+](=O)[O-])n1CCO", "Cc1ncc([N+](=O)[O-])[nH]1.C1CO1",
     "C-N disconnection: N-hydroxyethylation of 2-methyl-5-nitroimidazole with ethylene oxide."),
    ("Tolbutamide", "CCCCNC(=O)NS(=O)(=O)c1ccc(C)cc1", "Cc1ccc(S(N)(=O)=O)cc1.CCCCN=C=O",
     "Sulfonylurea disconnection: addition of p-toluenesulfonamide to butyl isocyanate."),
    ("Chlorpropamide", "CCCNC(=O)NS(=O)(=O)c1ccc(Cl)cc1", "NS(=O)(=O)c1ccc(Cl)cc1.CCCN=C=O",
     "Sulfonylurea disconnection: addition of 4-chlorobenzenesulfonamide to propyl isocyanate."),
    ("Benzphetamine", "CC(Cc1ccccc1)N(C)Cc1ccccc1", "CNC(C)Cc1ccccc1.ClCc1ccccc1",
     "C-N disconnection: N-benzylation of N-methylamphetamine with benzyl chloride."),
    ("Phensuximide", "CN1C(=O)CC(c2ccccc2)C1=O", "O=C1CC(c2ccccc2)C(=O)O1.CN",
     "Imide disconnection: condensation of phenylsuccinic anhydride with methylamine and cyclodehydration."),
    ("Mefenamic acid", "Cc1cccc(Nc2ccccc2C(=O)O)c1C", "O=C(O)c1ccccc1Cl.Cc1cccc(N)c1C",
     "Aryl C-N disconnection: copper-catalysed Ullmann coupling of 2-chlorobenzoic acid with 2,3-dimethylaniline."),
    ("Flufenamic acid", "O=C(O)c1ccccc1Nc1cccc(C(F)(F)F)c1", "O=C(O)c1ccccc1Cl.Nc1cccc(C(F)(F)F)c1",
     "Aryl C-N disconnection: Ullmann coupling of 2-chlorobenzoic acid with 3-(trifluoromethyl)aniline."),
    ("Diclofenac", "O=C(O)Cc1ccccc1Nc1c(Cl)cccc1Cl", "O=C1Cc2ccccc2N1c1c(Cl)cccc1Cl.O",
     "Lactam disconnection: alkaline hydrolysis of 1-(2,6-dichlorophenyl)indolin-2-one opens the ring to the "
     "arylacetic acid."),
    ("Diflunisal", "O=C(O)c1cc(-c2ccc(F)cc2F)ccc1O", "O=C(O)c1cc(Br)ccc1O.OB(O)c1ccc(F)cc1F",
     "Biaryl C-C disconnection: Suzuki coupling of 5-bromosalicylic acid with 2,4-difluorophenylboronic acid."),
    ("Chlorphenamine", "CN(C)CCC(c1ccc(Cl)cc1)c1ccccn1", "Clc1ccc(Cc2ccccn2)cc1.CN(C)CCCl",
     "C-C disconnection at the benzylic carbon: alkylation of deprotonated 2-(4-chlorobenzyl)pyridine with "
     "2-chloro-N,N-dimethylethylamine."),
    ("Moclobemide", "O=C(NCCN1CCOCC1)c1ccc(Cl)cc1", "O=C(Cl)c1ccc(Cl)cc1.NCCN1CCOCC1",
     "Amide disconnection: acylation of 4-(2-aminoethyl)morpholine with 4-chlorobenzoyl chloride."),
    ("Metoclopramide", "CCN(CC)CCNC(=O)c1cc(Cl)c(N)cc1OC", "COc1cc(N)c(Cl)cc1C(=O)O.CCN(CC)CCN",
     "Amide disconnection: coupling of 4-amino-5-chloro-2-methoxybenzoic acid with N,N-diethylethylenediamine."),
    ("Tacrine", "Nc1c2c(nc3ccccc13)CCCC2", "N#Cc1ccccc1N.O=C1CCCCC1",
     "Quinoline disconnection: Lewis-acid promoted Friedlander-type condensation of 2-aminobenzonitrile with "
     "cyclohexanone."),
    ("Nicotine", "CN1CCC[C@H]1c1cccnc1", "c1cncc([C@@H]2CCCN2)c1.C=O",
     "C-N disconnection: reductive N-methylation of nornicotine with formaldehyde (Eschweiler-Clarke)."),
    ("Edaravone", "CC1=NN(c2ccccc2)C(=O)C1", "NNc1ccccc1.CCOC(=O)CC(C)=O",
     "Pyrazolone disconnection: Knorr condensation of phenylhydrazine with ethyl acetoacetate."),
    ("Phenazone", "Cc1cc(=O)n(-c2ccccc2)n1C", "CC1=NN(c2ccccc2)C(=O)C1.CI",
     "C-N disconnection: N-methylation of 3-methyl-1-phenyl-2-pyrazolin-5-one with methyl iodide."),
    ("Phenylephrine", "CNC[C@H](O)c1cccc(O)c1", "CNCC(=O)c1cccc(O)c1.[H][H]",
     "Functional group interconversion: asymmetric hydrogenation of the aminoketone to the (R)-benzylic alcohol."),
    ("Zonisamide", "NS(=O)(=O)Cc1noc2ccccc12", "O=S(=O)(Cl)Cc1noc2ccccc12.N",
     "S-N disconnection: amination of 1,2-benzisoxazol-3-ylmethanesulfonyl chloride with ammonia."),
    ("Ethionamide", "CCc1cc(C(N)=S)ccn1", "CCc1cc(C#N)ccn1.S",
     "Thioamide disconnection: addition of hydrogen sulfide to 2-ethylisonicotinonitrile."),
    ("Hydrochlorothiazide", "NS(=O)(=O)c1cc2c(cc1Cl)NCNS2(=O)=O", "Nc1cc(Cl)c(S(N)(=O)=O)cc1S(N)(=O)=O.C=O",
     "Aminal disconnection: condensation of 4-amino-6-chlorobenzene-1,3-disulfonamide with formaldehyde closes the"
     " thiadiazine ring."),
    ("Acetazolamide", "CC(=O)Nc1nnc(S(N)(=O)=O)s1", "Nc1nnc(S(N)(=O)=O)s1.CC(=O)OC(C)=O",
     "Amide disconnection: N-acetylation of 5-amino-1,3,4-thiadiazole-2-sulfonamide with acetic anhydride."),
    ("Nitrofurantoin", "O=C1CN(/N=C/c2ccc([N+](=O)[O-])o2)C(=O)N1", "NN1CC(=O)NC1=O.O=Cc1ccc([N+](=O)[O-])o1",
     "Hydrazone (C=N) disconnection: condensation of 1-aminohydantoin with 5-nitrofurfural."),
    ("Propylthiouracil", "CCCc1cc(=O)[nH]c(=S)[nH]1", "CCCC(=O)CC(=O)OCC.NC(N)=S",
     "Pyrimidine disconnection: condensation of ethyl 3-oxohexanoate with thiourea under base."),
]

# textbook one-step reactions used as few-shot examples (target, reactants, explanation)
FEW_SHOT: list[tuple[str, str, str]] = [
    ("CC(=O)Nc1ccccc1", "CC(=O)Cl.Nc1ccccc1",
     "Amide disconnection: acylation of aniline with acetyl chloride gives acetanilide."),
    ("COC(=O)c1ccccc1", "O=C(O)c1ccccc1.CO",
     "Ester disconnection: Fischer esterification of benzoic acid with methanol."),
    ("CCOc1ccccc1", "Oc1ccccc1.CCBr",
     "Ether C-O disconnection: Williamson etherification of phenol with bromoethane under base."),
]


def drug_split(i: int) -> str:
    """Every fifth drug to val, the next to test, the rest to train."""
    return ("train", "train", "train", "val", "test")[i % 5]


DRUG_HEADER = ["name", "output", "input", "explanation", "split"]
FEW_SHOT_HEADER = ["output", "input", "explanation"]


def drug_rows() -> list[list[str]]:
    """The rows of demo-drug/drugs.csv (`output` is the reactants, `input` the target)."""
    return [[name, reactants, target, expl, drug_split(i)]
            for i, (name, target, reactants, expl) in enumerate(DRUGS)]


def few_shot_rows() -> list[list[str]]:
    """The rows of demo-drug/few_shot.csv."""
    return [[r, t, e] for t, r, e in FEW_SHOT]
