"""fusion"""
