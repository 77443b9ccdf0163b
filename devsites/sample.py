"""Write a deterministic JSON Lines sample of generated web pages with known near-duplicates.

Every word of every page is produced here: articles are built from small hand-made vocabularies and
sentence patterns (English and Chinese), each article with a share of its topic's words and places of
its own, rendered into a few site templates, and then varied the way near-duplicates appear on the web:

- ``mirror``: the same page on another site with other chrome (name, navigation, footer);
- ``copy``: the same article copied into another site's template;
- ``ads``: the same page with an ad block, a visit counter, a timestamp and a session id;
- ``edit``: the same page with one sentence rewritten.

Each line is ``{"url", "html", "group", "variant", "lang"}``: pages of one ``group`` are near-duplicates
of each other; different groups are distinct articles (many in the same template: hard negatives).
The same seed always gives the same bytes.

    python -m devsites.sample out/sample.jsonl [--articles 120] [--seed 7]
"""

from __future__ import annotations

import argparse
import gzip
import html
import json
import os
import random
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace

# --- vocabularies ------------------------------------------------------------------------------

EN_TOPICS = {
    "transport": "tram ferry timetable platform carriage depot commuter junction tunnel fare signal bridge",
    "farming": "orchard harvest barley tractor irrigation greenhouse cattle vineyard fertiliser meadow seed soil",
    "schools": "classroom curriculum teacher pupil timetable playground exam headteacher library homework",
    "health": "clinic nurse surgery waiting list vaccine pharmacy ward ambulance patient therapy",
    "housing": "tenant landlord rent flat terrace mortgage planning permit estate renovation insulation",
    "weather": "storm flood drought rainfall gale frost heatwave forecast river levee sandbag",
    "culture": "museum gallery exhibition concert choir theatre festival sculpture archive manuscript",
    "sport": "stadium league referee match striker goalkeeper trophy season tournament coach",
    "science": "laboratory telescope experiment sample microscope fossil satellite sensor dataset",
    "business": "bakery workshop factory warehouse shipment retailer supplier invoice startup market",
    "environment": "wetland forest recycling emissions pollution reservoir wildlife hedgerow compost beach",
    "technology": "broadband software server network outage upgrade smartphone app database cable",
}
EN_PLACES = (
    "Ashford Brackley Corrin Dunmore Elverton Fairholm Glenrowan Hartwell Ivybridge Kelso Lymford "
    "Marrowby Northcote Oakhampton Pellworth Quarry Hill Redmarsh Stonegate Thornbury Upton Vale Westerly"
).split()
EN_PEOPLE = (
    "residents volunteers councillors engineers shopkeepers parents students farmers nurses drivers "
    "researchers inspectors builders fishermen pensioners campaigners officials organisers"
).split()
EN_ADJ = (
    "new old local busy quiet small large long-awaited temporary annual regional northern southern "
    "crowded modest ambitious delayed popular costly careful rapid gradual"
).split()
EN_VERBS = (
    "opened closed repaired inspected expanded replaced delayed approved rejected funded surveyed "
    "rebuilt moved measured cleaned reviewed tested restored planned doubled"
).split()
EN_TIMES = (
    "last week|on Monday|this spring|after months of debate|before the winter|during the summer|"
    "early on Saturday|late last year|over the weekend|at the start of the month"
).split("|")
EN_PATTERNS = [
    "{People} in {place} {verb} the {adj} {noun} {time}.",
    "The {adj} {noun} near {place} was {verb} {time}, according to {people}.",
    "{Time}, {people} {verb} a {noun} and said the {noun2} would follow.",
    "Officials in {place} said the {noun} had been {verb} because the {noun2} was {adj}.",
    "Many {people} asked why the {noun2} was not {verb} {time}.",
    "A report on the {noun} found that the {noun2} in {place} was {adj} but {adj2}.",
    "The {noun} will be {verb} again {time} if the {people} agree.",
    "{People} from {place} compared the {adj} {noun} with the {noun2} across the valley.",
    "It is the first {adj} {noun} in {place} since the {noun2} was {verb}.",
    "Critics said the {noun2} was {adj}, while {people} praised the {adj2} {noun}.",
]

ZH_TOPICS = {
    "交通": "地铁 公交 站台 线路 车厢 换乘 高铁 票价 隧道 桥梁 司机 乘客",
    "农业": "果园 稻田 收割 灌溉 大棚 茶叶 化肥 种子 农机 合作社 粮食 养殖",
    "教育": "学校 课堂 教师 学生 考试 课程 校长 图书馆 作业 操场 家长 教材",
    "医疗": "医院 诊所 护士 医生 病床 疫苗 药房 急诊 患者 体检 挂号 门诊",
    "住房": "小区 租金 房东 租客 物业 电梯 装修 楼盘 业主 保障房 拆迁 维修",
    "天气": "暴雨 洪水 干旱 台风 寒潮 高温 预报 河道 堤坝 积水 降温 雷电",
    "文化": "博物馆 展览 音乐会 剧院 书法 非遗 庙会 画展 古籍 演出 舞蹈 戏曲",
    "体育": "球场 联赛 裁判 比赛 球员 教练 冠军 赛季 马拉松 训练 观众 体育馆",
    "科技": "实验室 卫星 芯片 数据 传感器 软件 机器人 网络 算法 服务器 手机 平台",
    "商业": "超市 工厂 仓库 快递 商户 供应商 订单 门店 品牌 市场 电商 物流",
    "环境": "湿地 森林 垃圾分类 排放 污染 水库 野生动物 绿化 河流 空气 噪音 节能",
}
ZH_PLACES = "东城区 西湖镇 南山县 北河乡 青石村 白沙镇 长乐街道 新华路 江北新区 石桥镇 云溪县 柳林村".split()
ZH_PEOPLE = "居民 志愿者 工作人员 专家 村民 商户 学生 家长 工程师 游客 市民 代表".split()
ZH_ADJ = "新的 老旧的 热闹的 安静的 临时的 大型的 小型的 重要的 便宜的 昂贵的 拥挤的 现代化的".split()
ZH_VERBS = "建成 修复 检查 扩建 更换 推迟 批准 改造 调整 开放 关闭 测试".split()
ZH_TIMES = "上周 本月初 今年春天 去年年底 周末 昨天上午 国庆前后 近日 入冬以前 暑假期间".split()
ZH_PATTERNS = [
    "{time}，{place}的{people}{verb}了{adj}{noun}。",
    "据{people}介绍，{place}附近的{noun}已于{time}{verb}，{noun2}也将随后{verb2}。",
    "{place}有关部门表示，由于{noun2}不足，{noun}的{verb}工作将{time}进行。",
    "不少{people}认为，{adj}{noun}给{place}带来了新的变化。",
    "一份关于{noun}的报告显示，{place}的{noun2}情况总体良好，但仍有改进空间。",
    "如果{people}同意，{noun}将在{time}再次{verb}。",
    "{place}的{people}把{adj}{noun}和附近的{noun2}作了比较。",
    "这是{place}自{noun2}{verb}以来的第一个{adj}{noun}。",
]


#: Syllables of the places an article is about: each article has names of its own, as real stories do.
EN_PLACE_PARTS = (
    "Ash Brook Cold Elm Fair Glen Hazel Iron King Lark Mill Oak Pine Red Stone Wil".split(),
    "ford field ton bury wick dale mouth haven".split(),
)
ZH_PLACE_PARTS = ("东西南北青白长新江石云柳金银龙凤桃杏梅松", "山河湖桥溪林田塘港岭坪湾", "镇村县乡")


@dataclass(frozen=True)
class Vocabulary:
    """The words one article is written with: part of its topic's words and of the common lists, and
    places of its own.  Two stories on one topic share some words, not all of them."""

    nouns: tuple[str, ...]
    places: tuple[str, ...]
    people: tuple[str, ...]
    adj: tuple[str, ...]
    verbs: tuple[str, ...]
    times: tuple[str, ...]

    @classmethod
    def draw(cls, rng: random.Random, lang: str, topic: str) -> Vocabulary:
        if lang == "en":
            first, second = EN_PLACE_PARTS
            places = [f"{rng.choice(first)}{rng.choice(second)}" for _ in range(2)]
            places += rng.sample(EN_PLACES, 2)
            lists = (EN_TOPICS[topic].split(), EN_PEOPLE, EN_ADJ, EN_VERBS, EN_TIMES)
        else:
            places = ["".join(map(rng.choice, ZH_PLACE_PARTS)) for _ in range(2)] + rng.sample(ZH_PLACES, 2)
            lists = (ZH_TOPICS[topic].split(), ZH_PEOPLE, ZH_ADJ, ZH_VERBS, ZH_TIMES)
        nouns, people, adj, verbs, times = (tuple(rng.sample(words, 6)) for words in lists)
        return cls(nouns, tuple(places), people, adj, verbs, times)


@dataclass(frozen=True)
class Article:
    lang: str
    topic: str
    words: Vocabulary
    title: str
    paragraphs: tuple[tuple[str, ...], ...]  # sentences of each paragraph
    author: str
    date: str

    def text(self) -> list[str]:
        """The paragraphs as text."""
        sep = " " if self.lang == "en" else ""
        return [sep.join(p) for p in self.paragraphs]

    def rewritten(self, paragraph: int, sentence: int, new: str) -> Article:
        """The same article with one sentence replaced."""
        paras = [list(p) for p in self.paragraphs]
        paras[paragraph][sentence] = new
        return replace(self, paragraphs=tuple(tuple(p) for p in paras))


def sentence(rng: random.Random, lang: str, v: Vocabulary) -> str:
    """One sentence in the article's words."""
    noun, noun2 = rng.sample(v.nouns, 2)
    if lang == "en":
        adj, adj2 = rng.sample(v.adj, 2)
        people, time = rng.choice(v.people), rng.choice(v.times)
        s = rng.choice(EN_PATTERNS).format(
            people=people,
            People=people.capitalize(),
            place=rng.choice(v.places),
            verb=rng.choice(v.verbs),
            adj=adj,
            adj2=adj2,
            noun=noun,
            noun2=noun2,
            time=time,
            Time=time[0].upper() + time[1:],
        )
        return s[0].upper() + s[1:]
    verb, verb2 = rng.sample(v.verbs, 2)
    return rng.choice(ZH_PATTERNS).format(
        people=rng.choice(v.people),
        place=rng.choice(v.places),
        verb=verb,
        verb2=verb2,
        adj=rng.choice(v.adj),
        noun=noun,
        noun2=noun2,
        time=rng.choice(v.times),
    )


def make_article(rng: random.Random, lang: str) -> Article:
    topics = EN_TOPICS if lang == "en" else ZH_TOPICS
    topic = rng.choice(sorted(topics))
    v = Vocabulary.draw(rng, lang, topic)
    paragraphs = tuple(
        tuple(sentence(rng, lang, v) for _ in range(rng.randint(3, 5))) for _ in range(rng.randint(5, 8))
    )
    if lang == "en":
        title = f"{v.places[0]} {v.nouns[0]} {v.verbs[0]} {v.times[0]}"
        author = f"{rng.choice('ABCDEFGHJKLMNPRST')}. {rng.choice(EN_PLACES)}"
    else:
        title = f"{v.places[0]}{v.nouns[0]}{v.verbs[0]}"
        author = f"记者 {rng.choice('王李张刘陈杨黄赵周吴')}{rng.choice('明华丽军静伟芳强磊洋')}"
    date = f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    return Article(lang, topic, v, title[0].upper() + title[1:], paragraphs, author, date)


# --- sites and templates -----------------------------------------------------------------------


@dataclass(frozen=True)
class Site:
    domain: str
    name: str
    lang: str
    template: str
    sections: tuple[str, ...]
    footer: str


SITES = [
    Site(
        "valley-courier.example",
        "The Valley Courier",
        "en",
        "news",
        ("News", "Local", "Business", "Sport"),
        "The Valley Courier is an independent local paper.",
    ),
    Site(
        "northern-post.example",
        "Northern Post",
        "en",
        "news",
        ("Home", "Region", "Money", "Weather", "Opinion"),
        "Northern Post, printed and online since the flood year.",
    ),
    Site(
        "hillside-notes.example",
        "Hillside Notes",
        "en",
        "blog",
        ("Home", "Archive", "About"),
        "Personal notes, reposted with thanks.",
    ),
    Site(
        "town-portal.example",
        "Town Portal",
        "en",
        "portal",
        ("Services", "News", "Events", "Jobs", "Contact"),
        "Town Portal aggregates stories from around the district.",
    ),
    Site("hexi-ribao.example", "河西日报", "zh", "news", ("首页", "本地", "财经", "体育"), "河西日报社 版权所有"),
    Site(
        "beicheng-wang.example",
        "北城网",
        "zh",
        "news",
        ("首页", "新闻", "民生", "天气", "评论"),
        "北城网 主办单位：北城传媒",
    ),
    Site("xiaozhan-blog.example", "小站随笔", "zh", "blog", ("首页", "归档", "关于"), "随手转载，仅供参考"),
    Site(
        "quanshi-menhu.example",
        "全市门户",
        "zh",
        "portal",
        ("政务", "新闻", "活动", "招聘", "联系"),
        "全市门户 汇集各区县资讯",
    ),
]


def _nav(site: Site) -> str:
    items = "".join(f'<li><a href="/{i}">{html.escape(s)}</a></li>' for i, s in enumerate(site.sections))
    return f"<nav><ul>{items}</ul></nav>"


def _body(article: Article, extra: str = "") -> str:
    return "\n".join(f"<p>{html.escape(p)}</p>" for p in article.text()) + extra


def news(site: Site, a: Article, extra: str, stats: str) -> str:
    return f"""<!DOCTYPE html><html lang="{a.lang}"><head><meta charset="utf-8">
<title>{html.escape(a.title)} | {html.escape(site.name)}</title><script>window.dataLayer=[];</script></head>
<body><header><a class="logo" href="/">{html.escape(site.name)}</a>{_nav(site)}</header>
<main><article><h1>{html.escape(a.title)}</h1>
<div class="byline">{html.escape(a.author)} · {a.date}</div>{stats}
{_body(a, extra)}
</article>
<aside class="sidebar"><h3>Most read</h3><ul><li><a href="/a/1">{html.escape(site.sections[-1])}</a></li>
<li><a href="/a/2">{html.escape(site.sections[0])}</a></li></ul></aside></main>
<footer><p>{html.escape(site.footer)}</p></footer></body></html>
"""


def blog(site: Site, a: Article, extra: str, stats: str) -> str:
    return f"""<html><head><title>{html.escape(a.title)} - {html.escape(site.name)}</title></head>
<body><div id="page"><div id="top-menu">{" | ".join(html.escape(s) for s in site.sections)}</div>
<table class="layout"><tr><td class="post">
<h2 class="post-title">{html.escape(a.title)}</h2>{stats}
<div class="post-body">{_body(a, extra)}</div>
<div class="post-meta">{a.date}</div></td>
<td class="widget"><b>{html.escape(site.sections[1])}</b></td></tr></table>
<div id="credits">{html.escape(site.footer)}</div></div></body></html>
"""


def portal(site: Site, a: Article, extra: str, stats: str) -> str:
    return f"""<!doctype html><html lang="{a.lang}"><head><meta charset="utf-8"><title>{html.escape(a.title)}</title>
</head><body><div class="topbar">{html.escape(site.name)}</div>{_nav(site)}
<div class="breadcrumb"><a href="/">{html.escape(site.sections[0])}</a> &gt; {html.escape(a.topic)}</div>
<div class="container"><div class="col-main"><section class="story">
<h1 class="story-title">{html.escape(a.title)}</h1>
<p class="meta">{html.escape(a.author)} {a.date}</p>{stats}
<div class="story-text">{_body(a, extra)}</div></section></div>
<div class="col-side"><div class="related"><a href="/x">{html.escape(site.sections[2])}</a></div></div></div>
<div class="footer">{html.escape(site.footer)}</div></body></html>
"""


TEMPLATES: dict[str, Callable[[Site, Article, str, str], str]] = {"news": news, "blog": blog, "portal": portal}


def render(site: Site, a: Article, *, ads: bool = False, rng: random.Random | None = None) -> str:
    extra = stats = ""
    if ads and rng is not None:
        offer = rng.choice(["Half price this week", "Free delivery today", "限时特惠 全场八折", "新用户立减"])
        extra = f'\n<div class="ad-banner"><a href="/promo?id={rng.randint(1, 999)}">{offer}</a></div>'
        stats = (
            f'<div class="counter">{rng.randint(100, 99999)} views · updated {a.date} '
            f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d} · sid {rng.getrandbits(48):012x}</div>"
        )
    return TEMPLATES[site.template](site, a, extra, stats)


# --- the sample --------------------------------------------------------------------------------


def _group(rng: random.Random, g: int) -> list[dict[str, str]]:
    """The original page of article ``g`` and 0 to 3 near-duplicate variants of it."""
    lang = "en" if g % 2 == 0 else "zh"
    sites = [s for s in SITES if s.lang == lang]
    site = rng.choice(sites)
    article = make_article(rng, lang)
    pages: list[tuple[Site, Article, str, str, bool]] = [(site, article, "original", "", False)]
    for variant in rng.sample(["mirror", "copy", "ads", "edit"], rng.randint(0, 3)):
        if variant == "mirror":  # another site's chrome around the same layout
            other = rng.choice([s for s in sites if s != site])
            pages.append((replace(other, template=site.template), article, variant, "", False))
        elif variant == "copy":  # the article alone, in another site's template
            pages.append((rng.choice([s for s in sites if s.template != site.template]), article, variant, "", False))
        elif variant == "ads":
            pages.append((site, article, variant, f"?utm_source=feed&sid={rng.getrandbits(32):08x}", True))
        else:
            i = rng.randrange(len(article.paragraphs))
            j = rng.randrange(len(article.paragraphs[i]))
            edited = article.rewritten(i, j, sentence(rng, lang, article.words))
            pages.append((site, edited, variant, "?rev=2", False))
    slug = f"{article.topic}-{g:04d}".replace(" ", "-")
    return [
        {
            "url": f"https://{s.domain}/{a.date[:7]}/{slug}.html{query}",
            "html": render(s, a, ads=ads, rng=rng),
            "group": f"g{g:04d}",
            "variant": variant,
            "lang": lang,
        }
        for s, a, variant, query, ads in pages
    ]


def sample(n_articles: int, seed: int) -> list[dict[str, str]]:
    """Pages of ``n_articles`` articles (half English, half Chinese) and their variants, shuffled."""
    rng = random.Random(seed)
    rows = [row for g in range(n_articles) for row in _group(rng, g)]
    rng.shuffle(rows)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output", help="JSON Lines file to write (.gz compressed if so named; '-' for stdout)")
    parser.add_argument("--articles", type=int, default=120, help="distinct articles (default: 120)")
    parser.add_argument("--seed", type=int, default=7, help="random seed (default: 7)")
    args = parser.parse_args(argv)
    rows = sample(args.articles, args.seed)
    data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")
    if args.output == "-":
        sys.stdout.buffer.write(data)
    else:
        os.makedirs(os.path.dirname(args.output) or ".", exist_ok=True)
        if args.output.endswith(".gz"):
            data = gzip.compress(data, mtime=0)
        with open(args.output, "wb") as f:
            f.write(data)
    variants = Counter(r["variant"] for r in rows)
    summary = ", ".join(f"{n} {v}" for v, n in sorted(variants.items()))
    print(f"wrote {len(rows)} pages of {args.articles} articles to {args.output} ({summary})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
