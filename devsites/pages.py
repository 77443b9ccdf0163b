"""Realistic fixture pages for the fingerprint tests (and the test site, :mod:`devsites.site_server`), built from
articles written for this test suite.

Each article is rendered in one of two English or two Chinese site templates (header, navigation,
sidebar, footer), optionally with the changes that make near-duplicates on the web: an ad block, a
visit counter with a timestamp and a session id, or a one-word edit.  Nothing here is copied from a
real site; names, places and numbers are invented.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Article:
    """The reusable part of a page: what a copying site would take."""

    title: str
    author: str
    date: str
    paragraphs: tuple[str, ...]

    def edited(self, paragraph: int, old: str, new: str) -> Article:
        """The same article with one occurrence of ``old`` in one paragraph replaced by ``new``."""
        text = self.paragraphs[paragraph]
        if old not in text:
            raise ValueError(f"{old!r} is not in paragraph {paragraph}")
        paras = list(self.paragraphs)
        paras[paragraph] = text.replace(old, new, 1)
        return replace(self, paragraphs=tuple(paras))


@dataclass(frozen=True)
class Counter:
    """Things that change on every fetch of the same page."""

    views: int
    timestamp: str
    session: str


RAINWATER = Article(
    title="Collecting rainwater on a small hill farm",
    author="Hannah Okafor",
    date="12 March 2024",
    paragraphs=(
        "When the spring on the upper field ran dry for the third summer in a row, Marta Lindqvist decided "
        "to stop waiting for the weather and start catching it. Her farm sits on forty acres of thin soil "
        "above a river valley, and most of the rain that falls on it used to run straight off the barn "
        "roofs and into a ditch beside the road.",
        "The first step was measuring. Lindqvist counted the area of every roof on the property: the main "
        "barn, the equipment shed, the chicken house and the farmhouse itself. A rough rule she learned "
        "from an extension officer is that each inch of rain falling on a thousand square feet of roof "
        "yields a little over six hundred gallons. With nearly six thousand square feet of roof and about "
        "thirty inches of rain a year, the farm was shedding more than a hundred thousand gallons.",
        "Storage turned out to be the expensive part. Gutters and downspouts cost little, but tanks large "
        "enough to carry the animals through a dry August do not. She bought two used food-grade tanks "
        "from a dairy that was closing, cleaned them with a pressure washer, and set them on gravel pads "
        "beside the barn. A neighbour who welds built a steel frame to keep them from shifting when the "
        "ground freezes.",
        "Keeping the water clean matters more than most beginners expect. Leaves, bird droppings and dust "
        "wash off a roof in the first minutes of every storm, so the system diverts that first flush into "
        "a separate pipe before any water reaches the tanks. Fine mesh screens on the gutters stop "
        "mosquitoes from breeding, and a floating intake draws water from just below the surface, where "
        "it is clearest.",
        "For the livestock the water needs no further treatment, and the goats seem to prefer it to the "
        "well. The vegetable beds get it through a drip line fed by a small solar pump, which runs only in "
        "daylight and needs no wiring back to the house. Lindqvist keeps a notebook of tank levels and "
        "rainfall, and after two seasons she can predict within a week when the tanks will run low.",
        "The project was not free of mistakes. An overflow pipe pointed the wrong way flooded the chicken "
        "run during an autumn storm, and one tank cracked at a seam in its first winter because a valve "
        "had been left closed. Both problems were cheap to fix once understood, and she now drains the "
        "lowest valve every November.",
        "Her advice to other growers is simple: measure the roofs before buying anything, size the tanks "
        "for the longest dry spell rather than the average one, and talk to the local water authority "
        "early, because the rules on collecting rain differ from one county to the next.",
    ),
)

LIGHTHOUSE = Article(
    title="Volunteers restore the keeper's cottage at Gull Point",
    author="Tomasz Brennan",
    date="3 June 2024",
    paragraphs=(
        "For most of the last century the keeper's cottage at Gull Point stood empty, its windows boarded "
        "and its chimney leaning toward the sea. The lighthouse beside it was automated in 1962, and once "
        "the last keeper moved inland nobody had a reason to climb the cliff path except walkers and the "
        "occasional photographer.",
        "That changed four years ago, when a group of retired teachers, boat builders and one stubborn "
        "architect formed a trust to buy the cottage from the coast guard for a symbolic sum. Their plan "
        "was to turn it into a small museum about the families who kept the light, using letters, logbooks "
        "and tools that had been scattered among relatives along the coast.",
        "The building itself was the first challenge. Salt air had eaten through the iron ties that held "
        "the stone walls together, and the roof timbers were soft with rot. The architect insisted on lime "
        "mortar instead of cement, arguing that stone walls by the sea must breathe or they will crack as "
        "water freezes inside them. Volunteers spent two summers raking out old joints by hand.",
        "Inside, the trust found more than it expected. Under layers of wallpaper in the front room were "
        "pencil marks recording the heights of children, with names and dates running from 1898 to 1931. "
        "A loose floorboard in the kitchen hid a tin box holding buttons, a pocket knife and a letter from "
        "a keeper's wife asking her sister to send seeds for the garden.",
        "Those objects now sit in glass cases in the room where they were found. The logbooks, lent by a "
        "granddaughter of the last keeper, record every storm, every ship that passed close to the rocks "
        "and every night the lamp failed. Visitors can turn the pages of a facsimile while listening to "
        "recordings of former residents describing winters when the supply boat could not land for weeks.",
        "Money remains tight. The trust pays for insurance and heating from ticket sales and a small cafe "
        "in the old boat shed, and each winter it applies for grants to repair another part of the "
        "building. The next project is the garden wall, which collapsed in a gale and still lies in a heap "
        "of stones beside the path.",
        "The cottage opens from Easter to October, and the trust is always looking for volunteers who can "
        "guide visitors, mend furniture or simply sit at the door and sell tickets on a windy afternoon.",
    ),
)

BACKUPS = Article(
    title="Nightly backups for a home server in one evening",
    author="Priya Raman",
    date="21 September 2024",
    paragraphs=(
        "A home server tends to collect the files nobody wants to lose: family photographs, scanned tax "
        "records, the music library that took years to build. Yet many such machines run for years "
        "without a tested backup, because setting one up feels like a weekend project that can always "
        "wait. This guide describes a simple arrangement that takes an evening to configure and then runs "
        "on its own.",
        "The plan follows the familiar three, two, one rule: keep three copies of the data, on two "
        "different kinds of storage, with one copy away from the house. Here the first copy is the live "
        "data on the server, the second is a snapshot on an external disk attached by USB, and the third "
        "is an encrypted archive sent to a rented storage bucket each night.",
        "Start with the snapshots. A filesystem that supports copy-on-write snapshots makes the local copy "
        "almost free, because a snapshot records only the blocks that change. Schedule one every hour and "
        "keep them for two days, then keep one a day for a month. A short script run by the system timer "
        "creates the snapshot, copies it to the external disk and deletes the ones that have expired.",
        "For the remote copy, choose a tool that encrypts on the server before anything leaves it, splits "
        "files into chunks and uploads only the chunks it has not sent before. Deduplicating tools of this "
        "kind make a nightly upload of a large photo library cost a few megabytes instead of many "
        "gigabytes. Keep the encryption passphrase in a password manager and also on paper in a drawer, "
        "since an archive nobody can decrypt is worthless.",
        "Logging deserves as much care as the copying. Have the script write a line with the start time, "
        "the end time and the amount transferred, and send an email or a phone notification when a run "
        "fails or when no run has finished for two days. Silent failure is the most common way that "
        "backups stop working without anyone noticing.",
        "Finally, test a restore. Once a month, pick a random folder, restore it from the remote archive "
        "into a scratch directory and compare it with the original. The first test usually reveals "
        "something: a folder excluded by mistake, a permission that blocks reading, or a passphrase typed "
        "differently on two machines. Fixing those problems while nothing is lost is the whole point.",
    ),
)

LIBRARY = Article(
    title="社区图书馆改造之后",
    author="周晓岚",
    date="2024年3月12日",
    paragraphs=(
        "走进城东街道的社区图书馆，很难想象这里三年前还是一间堆满旧桌椅的仓库。改造之后，宽大的落地窗让阳光"
        "洒满阅览区，书架按照主题重新排列，儿童绘本区铺上了柔软的地垫，老人们常坐的靠窗位置也换成了更舒适的沙发。",
        "图书馆负责人王丽华介绍，改造前他们做了一次问卷调查，收回了六百多份答卷。居民最希望增加的是自习座位和"
        "儿童活动空间，其次是延长开放时间。根据这些意见，图书馆把开放时间延长到晚上九点，周末也照常开放，"
        "自习座位从二十个增加到八十个。",
        "除了借书还书，图书馆还定期举办各种活动。每周六上午有志愿者给孩子们讲故事，每月一次的读书会吸引了不少"
        "上班族参加。退休教师李建国在这里开设了书法课，报名的居民从七岁的小学生到七十多岁的老人都有。",
        "数字化服务也是这次改造的重点。读者可以用手机查询馆藏、预约图书，还能通过自助借还机办理手续，不用再排队"
        "等待。社区图书馆与市图书馆实现了通借通还，居民在家门口就能借到全市的藏书。",
        "当然，改造过程中也遇到了困难。资金有限，很多书架是从其他单位调剂来的，部分装修工作由居民志愿者完成。"
        "王丽华说，正是大家的参与，让图书馆真正成为了社区的公共客厅。下一步，他们计划在楼顶开辟一个小花园，"
        "让读者在春秋季节可以到户外阅读。",
    ),
)

HOME_SERVER = Article(
    title="家庭服务器的数据备份方案",
    author="林志远",
    date="2024年9月21日",
    paragraphs=(
        "很多家庭都有一台常年开机的小型服务器，里面存放着照片、视频和各种重要文件。然而，真正为这些数据做过完整"
        "备份的人并不多。一旦硬盘损坏或者误删文件，多年积累的资料可能瞬间化为乌有。",
        "业内常说的备份原则可以概括为三二一：至少保留三份数据，存放在两种不同的存储介质上，其中一份放在异地。"
        "按照这个原则，第一份是服务器上的原始数据，第二份是外接移动硬盘上的快照，第三份是加密后上传到云存储的归档。",
        "本地快照最好利用文件系统自带的写时复制功能。快照只记录发生变化的数据块，因此几乎不占额外空间。可以设置"
        "每小时生成一次快照，保留两天，再每天保留一份，保留一个月。定时任务负责创建快照、同步到移动硬盘并清理过期的副本。",
        "异地备份应当选择支持客户端加密和增量上传的工具。数据在离开服务器之前就已经加密，云服务商无法读取内容；"
        "而增量上传只传送新增或修改过的数据块，每晚的上传量通常只有几兆字节。加密口令必须妥善保管，建议同时记录在"
        "密码管理器和纸质笔记本上。",
        "最后，也是最容易被忽视的一步，是定期做恢复演练。每个月随机挑选一个文件夹，从云端恢复到临时目录，再与原始"
        "文件逐一比对。很多问题只有在恢复时才会暴露出来，例如某个目录被错误地排除在外，或者权限设置导致文件无法读取。",
    ),
)

TEA_GARDEN = Article(
    title="山间茶园的四季",
    author="陈雨桐",
    date="2024年4月8日",
    paragraphs=(
        "清晨五点，雾气还没有散去，茶农陈师傅已经背着竹篓走进了山腰上的茶园。这片茶园位于海拔八百米的山坡上，"
        "常年云雾缭绕，昼夜温差大，出产的绿茶香气清高，在周边县城小有名气。",
        "春茶是一年中最重要的收获。清明前后，新芽刚刚冒出一芽一叶，采茶工人要赶在露水干之前采摘，才能保证鲜叶的"
        "品质。陈师傅说，采茶看似简单，其实很讲究手法，只能用指尖轻轻提起，不能用指甲掐断，否则断口会发红，"
        "影响成茶的颜色。",
        "鲜叶采回来之后要立刻摊晾，然后进行杀青、揉捻和烘干。过去这些工序全靠手工完成，一锅茶要炒上半个多小时，"
        "师傅的双手常常被烫出水泡。如今村里建起了合作社加工厂，大部分工序改用机器，只有少量高档茶仍坚持手工炒制。",
        "夏天和秋天，茶园的工作转向管理。茶农要除草、施肥、修剪茶树，还要防治病虫害。为了减少农药使用，合作社在"
        "茶园里挂上了黄色粘虫板，并在茶树之间套种了大豆和油菜，既能改良土壤，又能吸引害虫的天敌。",
        "冬天是茶园休养的季节。茶农给茶树培土保暖，同时利用农闲时间参加培训，学习网上销售和品牌包装。近几年，"
        "越来越多的年轻人回到村里，通过直播向全国各地的顾客介绍家乡的茶叶，茶园的收入比十年前翻了一番。",
    ),
)

EN_ARTICLES = (RAINWATER, LIGHTHOUSE, BACKUPS)
ZH_ARTICLES = (LIBRARY, HOME_SERVER, TEA_GARDEN)

e = html.escape


def _paragraphs(article: Article, ad_html: str) -> str:
    """The body paragraphs, with ``ad_html`` (if any) between the second and the third."""
    out = []
    for i, p in enumerate(article.paragraphs):
        out.append(f"<p>{e(p)}</p>")
        if i == 1 and ad_html:
            out.append(ad_html)
    return "\n        ".join(out)


def gazette(article: Article, *, ads: bool = False, counter: Counter | None = None) -> str:
    """An English news site with a semantic template (header, nav, article, aside, footer)."""
    sid = f"?sid={counter.session}" if counter else ""
    inline_ad = (
        '<div class="ad-inline" data-slot="mid-article"><a href="https://ads.example.net/c?id=77" rel="sponsored">'
        '<img src="/ads/garden-tools.png" alt="">Spring sale: save on garden tools and greenhouse kits this '
        "week only</a></div>"
        if ads
        else ""
    )
    top_ad = (
        '\n  <div class="ad-banner" id="leaderboard"><a href="https://ads.example.net/c?id=12">Cheap flights to '
        "sunny islands, book now and pay later</a></div>"
        if ads
        else ""
    )
    stats = (
        f'\n        <div class="story-stats">Viewed {counter.views:,} times · Updated {counter.timestamp}</div>'
        if counter
        else ""
    )
    footer_session = (
        f'\n    <p class="debug">Page generated {counter.timestamp} for session {counter.session}</p>'
        if counter
        else ""
    )
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>{e(article.title)} | The Riverside Gazette</title>
  <link rel="stylesheet" href="/static/site.css" media="all">
  <script src="/static/app.js" defer></script>
  <script>window.dataLayer = [{{"section": "features", "paywall": false}}];</script>
  <style>.story p {{ line-height: 1.6; }}</style>
</head>
<body class="article-page" data-section="features">{top_ad}
  <header class="site-header">
    <a class="logo" href="/{sid}" title="Front page">The Riverside Gazette</a>
    <p class="tagline">News from the valley since 1921</p>
  </header>
  <nav class="main-nav" aria-label="Sections">
    <ul>
      <li><a class="nav-link" href="/local{sid}" title="Local news">Local</a></li>
      <li><a class="nav-link" href="/farming{sid}" title="Farming">Farming</a></li>
      <li><a class="nav-link" href="/business{sid}" title="Business">Business</a></li>
      <li><a class="nav-link" href="/sport{sid}" title="Sport">Sport</a></li>
      <li><a class="nav-link" href="/opinion{sid}" title="Opinion">Opinion</a></li>
    </ul>
  </nav>
  <div class="breadcrumb"><a href="/">Home</a> › <a href="/features">Features</a></div>
  <div class="layout">
    <main id="content" role="main">
      <article class="story" itemscope itemtype="https://schema.org/NewsArticle">
        <h1 class="headline" itemprop="headline">{e(article.title)}</h1>
        <p class="byline">By <span itemprop="author">{e(article.author)}</span> · {e(article.date)}</p>{stats}
        {_paragraphs(article, inline_ad)}
      </article>
      <div class="share-tools"><a href="/share/mail">Email</a> <a href="/share/print">Print</a></div>
    </main>
    <aside class="sidebar" aria-label="More stories">
      <h3>Most read</h3>
      <ul>
        <li><a href="/local/bridge-repairs" class="story-link">Bridge repairs delayed until autumn</a></li>
        <li><a href="/sport/rowing-club" class="story-link">Rowing club wins regional title</a></li>
        <li><a href="/business/bakery" class="story-link">Family bakery celebrates fifty years</a></li>
        <li><a href="/local/market" class="story-link">Saturday market moves to the square</a></li>
      </ul>
      <div class="newsletter"><p>Get the weekly digest in your inbox.</p>
        <form action="/subscribe" method="post"><input type="email" name="email" placeholder="Email">
        <button type="submit">Sign up</button></form></div>
    </aside>
  </div>
  <footer class="site-footer">
    <p>© 2024 The Riverside Gazette. All rights reserved.</p>
    <ul class="footer-links"><li><a href="/about">About us</a></li><li><a href="/contact">Contact</a></li>
      <li><a href="/privacy">Privacy policy</a></li><li><a href="/advertise">Advertise</a></li></ul>{footer_session}
  </footer>
  <!-- served by web-3 -->
</body>
</html>
"""


def ledger(article: Article) -> str:
    """An English blog with an older, table-based template and different class names."""
    return f"""<html>
<head>
<meta http-equiv="Content-Type" content="text/html; charset=utf-8">
<title>{e(article.title)} - Northwind Ledger</title>
<style type="text/css">body {{ font-family: Georgia, serif; }} td.col-side {{ width: 220px; }}</style>
</head>
<body>
<div id="wrapper">
<div id="topbar"><b>Northwind Ledger</b> <a href="/login">Sign in</a> <a href="/subscribe">Subscribe</a></div>
<div id="menu"><a href="/">Front page</a> | <a href="/world">World</a> | <a href="/science">Science</a> |
<a href="/travel">Travel</a> | <a href="/letters">Letters</a></div>
<table class="frame" width="100%" cellpadding="4">
<tr>
<td class="col-main" valign="top">
<div class="post">
<h2 class="post-title">{e(article.title)}</h2>
<div class="post-meta">Posted on {e(article.date)} in Features</div>
<div class="entry">
{_paragraphs(article, "")}
</div>
<div class="tags">Tags: <a href="/tag/features">features</a>, <a href="/tag/weekend">weekend</a></div>
</div>
</td>
<td class="col-side" valign="top">
<div class="widget"><h4>Archives</h4><ul><li><a href="/2024/09">September 2024</a></li>
<li><a href="/2024/08">August 2024</a></li><li><a href="/2024/07">July 2024</a></li></ul></div>
<div class="widget"><h4>Blogroll</h4><ul><li><a href="https://example.org/a">Harbour notes</a></li>
<li><a href="https://example.org/b">The allotment diary</a></li></ul></div>
</td>
</tr>
</table>
<div id="foot">Northwind Ledger is published by Northwind Media. Letters to the editor are welcome.</div>
</div>
</body>
</html>
"""


def portal(article: Article, *, ads: bool = False, counter: Counter | None = None, charset: str = "utf-8") -> str:
    """A Chinese news portal template (navigation, channel sidebar, footer with licence numbers)."""
    sid = f"?sid={counter.session}" if counter else ""
    inline_ad = (
        '<div class="ad-box" data-pos="2"><a href="https://ad.example.cn/click?id=305">'
        '<img src="/ad/lamp.jpg" alt="">限时特惠：护眼台灯买一送一，满三百元包邮到家</a></div>'
        if ads
        else ""
    )
    top_ad = (
        '\n<div class="top-ad"><a href="https://ad.example.cn/click?id=9">暑期旅游线路大促销，立即预订享八折</a></div>'
        if ads
        else ""
    )
    stats = (
        f'\n      <div class="article-info">阅读 {counter.views} 次　更新时间：{counter.timestamp}</div>'
        if counter
        else ""
    )
    footer_session = f'\n  <p class="trace">会话 {counter.session} 生成于 {counter.timestamp}</p>' if counter else ""
    return f"""<!DOCTYPE html>
<html lang="zh-CN">
<head>
<meta charset="{charset}">
<title>{e(article.title)}_城东新闻网</title>
<script type="text/javascript">var _hmt = _hmt || []; var channel = "社区";</script>
</head>
<body>{top_ad}
<div class="header">
  <div class="logo"><a href="/{sid}">城东新闻网</a></div>
  <div class="search"><form action="/search"><input name="q" type="text"><button>搜索</button></form></div>
</div>
<div class="nav">
  <a href="/{sid}" class="cur">首页</a><a href="/news/{sid}">要闻</a><a href="/society/{sid}">社会</a>
  <a href="/tech/{sid}">科技</a><a href="/culture/{sid}">文化</a><a href="/life/{sid}">生活</a>
</div>
<div class="main">
  <div class="left">
    <div class="article" id="article-main" data-id="20240312">
      <h1>{e(article.title)}</h1>
      <div class="source">来源：城东新闻网　作者：{e(article.author)}　{e(article.date)}</div>{stats}
      <div class="content" id="js_content">
        {_paragraphs(article, inline_ad)}
      </div>
      <div class="editor">责任编辑：孙明</div>
    </div>
  </div>
  <div class="right sidebar">
    <div class="box"><h3>热门文章</h3><ul>
      <li><a href="/a/1001.html">老旧小区加装电梯进展顺利</a></li>
      <li><a href="/a/1002.html">夜市重新开放吸引大量市民</a></li>
      <li><a href="/a/1003.html">中学生机器人大赛落下帷幕</a></li>
    </ul></div>
  </div>
</div>
<div class="footer">
  <p>关于我们 | 联系方式 | 广告服务 | 网站地图</p>
  <p>版权所有 城东新闻网 未经授权禁止转载</p>{footer_session}
</div>
</body>
</html>
"""


def forum(article: Article) -> str:
    """A Chinese forum-style template where the same article is reposted."""
    return f"""<!DOCTYPE html>
<html>
<head><meta charset="utf-8"><title>{e(article.title)} - 山野论坛</title>
<style>.postbody {{ font-size: 14px; }}</style></head>
<body>
<div id="toptb"><a href="/member/login" rel="nofollow">登录</a> <a href="/member/register" rel="nofollow">注册</a></div>
<div id="hd"><h2><a href="/">山野论坛</a></h2>
<ul id="nv"><li><a href="/forum">论坛</a></li><li><a href="/group">群组</a></li><li><a href="/blog">日志</a></li>
<li><a href="/album">相册</a></li></ul></div>
<div id="pt">当前位置：<a href="/">首页</a> &gt; <a href="/forum-12">生活杂谈</a></div>
<div id="ct">
<table class="plhin" cellspacing="0">
<tr><td class="pls"><div class="authi">楼主：风起南山</div><div class="usergroup">中级会员</div></td>
<td class="plc">
<h1 class="ts">{e(article.title)}</h1>
<div class="postbody" id="postmessage_1">
{_paragraphs(article, "")}
</div>
<div class="sign">转载请注明出处</div>
</td></tr>
</table>
</div>
<div id="ft"><p>山野论坛 版权所有 2024 | 联系管理员 | 手机版</p></div>
</body>
</html>
"""


COUNTER_A = Counter(views=18342, timestamp="2024-05-14 08:21:07", session="9f3a7c21e4b8d605")
COUNTER_B = Counter(views=18517, timestamp="2024-05-14 16:02:55", session="2b6e0d9c71fa3e48")


def near_duplicate_pairs() -> dict[str, tuple[str, str]]:
    """Pairs of pages that a reader would call the same page, by cause (English and Chinese)."""
    r, lib = RAINWATER, LIBRARY
    return {
        "en-copy-other-template": (gazette(r), ledger(r)),
        "en-ads": (gazette(r), gazette(r, ads=True)),
        "en-counter-vs-none": (gazette(r), gazette(r, counter=COUNTER_A)),
        "en-counter-two-fetches": (gazette(r, counter=COUNTER_A), gazette(r, counter=COUNTER_B)),
        "en-one-word-edit": (gazette(r), gazette(r.edited(2, "steel frame", "iron frame"))),
        "en-other-article-copy": (gazette(BACKUPS), ledger(BACKUPS)),
        "zh-copy-other-template": (portal(lib), forum(lib)),
        "zh-ads": (portal(lib), portal(lib, ads=True)),
        "zh-counter-vs-none": (portal(lib), portal(lib, counter=COUNTER_A)),
        "zh-counter-two-fetches": (portal(lib, counter=COUNTER_A), portal(lib, counter=COUNTER_B)),
        "zh-one-word-edit": (portal(lib), portal(lib.edited(0, "宽大的", "明亮的"))),
        "zh-other-article-copy": (portal(HOME_SERVER), forum(HOME_SERVER)),
    }


def distinct_pairs() -> dict[str, tuple[str, str]]:
    """Pairs of different articles in the same template (structurally identical, not duplicates)."""
    out: dict[str, tuple[str, str]] = {}
    for render, articles, lang in (
        (gazette, EN_ARTICLES, "en"),
        (ledger, EN_ARTICLES, "en"),
        (portal, ZH_ARTICLES, "zh"),
        (forum, ZH_ARTICLES, "zh"),
    ):
        for i, a in enumerate(articles):
            for b in articles[i + 1 :]:
                out[f"{lang}-{render.__name__}-{a.title[:12]}|{b.title[:12]}"] = (render(a), render(b))
    return out


def determinism_pages() -> list[bytes | str]:
    """About a dozen pages: English and Chinese text, UTF-8 strings, GBK bytes with and without a declaration."""
    pages: list[bytes | str] = [gazette(a) for a in EN_ARTICLES]
    pages += [ledger(RAINWATER), gazette(LIGHTHOUSE, ads=True, counter=COUNTER_A)]
    pages += [portal(a) for a in ZH_ARTICLES]
    pages += [forum(TEA_GARDEN), portal(LIBRARY, ads=True, counter=COUNTER_B)]
    pages.append(portal(HOME_SERVER, charset="gbk").encode("gbk"))  # declared GBK
    pages.append(forum(TEA_GARDEN).replace('<meta charset="utf-8">', "").encode("gbk"))  # undeclared GBK
    return pages
