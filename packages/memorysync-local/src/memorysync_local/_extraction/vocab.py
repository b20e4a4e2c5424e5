"""The rule extractor's word classes (grammar, not phrases), written as data."""

from __future__ import annotations

import re


def vocab(words: str) -> frozenset[str]:
    """A word class, written as one space-separated string."""
    return frozenset(words.split())


# --- word classes (grammar, not phrases) ------------------------------------

_FILLER = vocab(
    "ok okay okey k kk thanks thank thx ty cheers cool great nice sure yes yeah yep yup no "
    "nope nah hi hello hey hiya yo bye goodbye cya later lol lmao haha hahaha hmm hm mm umm "
    "uh um ah oh wow alright right fine good perfect awesome amazing excellent got it sounds "
    "noted understood gotcha indeed agreed true totally exactly absolutely definitely welcome "
    "morning evening afternoon night good-night you very much so much a lot again ha huh oops "
    "whoa np gm gn brb ttyl sweet neat lovely wonderful fantastic super makes sense will do "
    "there"
)
_QUESTION_HEADS = vocab(
    "what what's whats who who's whom whose where where's when why how how's which is are am "
    "was were do does did can could would will should shall may might have has isn't aren't "
    "wasn't don't doesn't didn't can't couldn't won't wouldn't shouldn't anyone any"
)
_IMPERATIVE_HEADS = vocab(
    "please tell give show find write help explain book make list summarize summarise "
    "translate check search send create draft suggest recommend describe compare calculate "
    "compute convert fix add remove delete change update plan let let's lets generate read "
    "look get set schedule cancel order buy pick choose name rewrite review edit format sort "
    "count define teach remind walk open close go play stop start continue repeat try imagine "
    "pretend brainstorm outline estimate turn call watch keep avoid mind consider be"
)
_DISCOURSE = vocab(
    "oh and also btw actually well so anyway anyways fyi honestly plus but hey hi hello ok "
    "okay alright yeah yes no um uh hmm right fine sure thanks basically note"
)
_TRANSIENT = re.compile(
    r"\b(?:today|tonight|right now|at the moment|this (?:morning|afternoon|evening|minute)|"
    r"just now|for now|atm|rn|yesterday)\b"
)
# "I'll check it out later", "I need to sleep": remarks about the next few minutes.
_PASSING_REMARK = re.compile(
    r"^(?:i'll|i\s+will|i'm\s+gonna|i'm\s+going\s+to|i\s+might|i\s+may|i'd\s+better|"
    r"we'll)\s+(?:probably\s+|just\s+|definitely\s+|maybe\s+)?"
    r"(?:check|look|try|do|sort|think|let|see|get\s+back|read|watch|give|take\s+a\s+look|"
    r"figure|handle|ask|send|go\s+with|keep|bear|have\s+a\s+look|consider)\b"
    r"|^(?:i|we)\s+(?:need|have|gotta|got)\s+(?:to\s+)?(?:sleep|go|run|leave|eat|rest|head|"
    r"log\s+off|get\s+going|think|check|work|get\s+back)\b"
    r"|^i\s+(?:need|want|could\s+use)\s+(?!to\b)",
    re.IGNORECASE,
)
# A past event: something happened ("turned 3 yesterday", "signed up", "went vegan").
_PAST_EVENT = re.compile(
    r"\b(?:[a-z]+ed|went|grew|got|made|took|came|began|became|bought|left|met|saw|found|quit|"
    r"ran|spent|sold|wrote|taught|won|lost|built|broke|fell|flew|gave|held|paid|rode|"
    r"chose|drove|ate|drank|did|had|was|were|sang|swam|started|joined|picked|caught|taken|"
    r"begun|done|gone|become|grown)\b"
    # "I've taken up fishing": the perfect is something that happened too
    r"|^(?:i've|we've|i\s+have|we\s+have)\s+(?:just\s+|recently\s+|finally\s+)?"
    r"(?!been\b|got\b|to\b)[a-z]+\b",
    re.IGNORECASE,
)
# A named person or pet as subject ("Biscuit had surgery", "Kavi started piano").
_NAMED_SUBJECT = re.compile(
    r"^(?-i:[A-Z][a-z]+)(?:'s\s+\w+)?\s+(?:(?:has|had|is|was|turned|started|just|got|"
    r"lives|works|moved|loves|hates|passed|broke|finished|joined|became)\b|[a-z]+ed\b)"
)
_NOT_NAMES = vocab(
    "work life it this that there everything things today weather traffic school dinner "
    "lunch breakfast he she they it's that's there's sounds looks seems feels maybe "
    "someone everyone nobody people"
)
# "Ana is my sister", "Radiohead is my new favourite band".
_IS_MY = re.compile(r"^\S.*?\b(?:is|are)\s+(?:now\s+)?(?:my|our)\s+\w+", re.IGNORECASE)
_DATE_WORDS = re.compile(
    r"\b(?:yesterday|today|tomorrow|last|next|ago|january|february|march|april|may|june|"
    r"july|august|september|october|november|december|monday|tuesday|wednesday|thursday|"
    r"friday|saturday|sunday|spring|summer|autumn|fall|winter|weekends?|weeks?|months?|years?|days?|ago)\b",
    re.IGNORECASE,
)
_CONVERSATIONAL_COGNITION = vocab(
    "think guess suppose see know understand agree disagree mean meant wonder wondered "
    "wondering forgot forget bet assume said asked told noticed hope appreciate doubt reckon "
    "was just"
)
# "I'm <state>": a passing state of the conversation, not a fact about the person.
_PASSING_STATES = vocab(
    "fine good ok okay well great tired hungry bored back here done ready confused lost sorry "
    "glad happy sure kidding joking curious wondering asking trying looking thinking "
    "listening waiting interested afraid just still so very really excited"
)
_REQUEST_VERBS = vocab(
    "know see ask check get find try understand talk hear order book make change cancel read "
    "have learn watch buy"
)
_PREFERENCE = vocab(
    "like likes love loves enjoy enjoys prefer prefers adore hate hates dislike dislikes "
    "detest favorite favourite favourites favorites fan fond keen rather into passionate "
    "obsessed crave addicted can't stand"
)
_CONSTRAINT = vocab(
    "allergic allergy allergies intolerant intolerance vegetarian vegan pescatarian gluten "
    "lactose kosher halal diabetic diabetes celiac coeliac avoid avoids must cannot can't "
    "unable allowed budget wheelchair deaf blind pregnant medication medications insulin "
    "afraid scared terrified fear phobia sober shellfish epileptic asthma asthmatic colorblind "
    "dyslexic diet"
)
_PLAN = vocab(
    "plan plans planning going gonna will 'll intend intending hope hoping aim aiming "
    "considering next scheduled booked moving starting learning saving preparing trying "
    "someday eventually upcoming soon retire retiring wedding training expecting"
)
_IDENTITY = vocab(
    "work works working job live lives living based from born grew raised old name named "
    "called studying study student graduated retired moved speak native pronouns citizen "
    "engineer teacher nurse doctor developer designer manager lawyer student accountant chef "
    "writer artist scientist researcher programmer farmer pilot musician freelancer"
)
_RELATION_NOUNS = vocab(
    "wife husband partner spouse girlfriend boyfriend son sons daughter daughters kid kids "
    "child children mom mum mother dad father parents parent brother brothers sister sisters "
    "sibling siblings grandma grandmother grandpa grandfather grandparents aunt uncle cousin "
    "cousins niece nephew friend friends boss manager colleague colleagues coworker coworkers "
    "roommate dog dogs cat cats pet pets puppy kitten family fiance fiancee baby twins "
    "in-laws stepson stepdaughter"
)
_RELATION_STATE = vocab("married divorced single engaged widowed dating")
_FREQUENCY = vocab(
    "usually always never often normally typically sometimes rarely every weekly daily "
    "regularly mostly weekends mondays tuesdays wednesdays thursdays fridays saturdays sundays"
)
_IRREGULAR_PAST = vocab(
    "went grew was were had got made took came began became bought left met saw found quit "
    "ran spent sold wrote taught thought told won lost knew kept built broke fell flew felt "
    "forgot gave heard held paid rode said sat sent slept spoke stood swam chose "
    "drove ate drank did been born lived moved worked studied"
)
_ADVERBS = vocab(
    "really also just still sometimes only rarely mostly absolutely totally definitely "
    "generally currently recently usually always never often normally typically actually "
    "honestly seriously truly kind sort"
)
_NEGATORS = vocab("don't dont do not never")
_AUXILIARIES = vocab("am is are was were be do does did have has had will would shall not")
_MODALS = vocab("can could should must might may shall")
